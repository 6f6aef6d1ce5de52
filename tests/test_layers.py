"""The house's import rules: every import runs down the layers, and no modules import each other in a circle.

Read from the source with `ast` (nothing is imported), lazy imports inside functions included: an import
deferred for speed is still a dependency.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top; a package may import its own modules and those of any lower layer.
LAYERS = [
    {"iobench", "iobench.errors"},
    {"iobench.choices", "iobench.units", "iobench.progress", "iobench.torchrun_env"},
    {"iobench.settings"},
    {"iobench.spec", "iobench.results", "iobench.events"},
    {"iobench.system"},
    {"iobench.storage"},
    {"iobench.formats"},
    {"iobench.data"},
    {"iobench.loaders"},
    {"iobench.measuring"},
    {"iobench.plan"},
    {"iobench.judge"},
    {"iobench.run", "iobench.checkpoint", "iobench.feed"},
    {"iobench.sessions"},
    {"iobench.report"},
    {"iobench.api", "iobench.cli"},
    {"iobench.__main__"},
]
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def modules() -> dict[str, Path]:
    found = {}
    for base, prefix in ((ROOT / "iobench", ("iobench",)), (ROOT / "formats", ("iobench", "formats"))):
        for path in base.rglob("*.py"):
            parts = prefix + path.relative_to(base).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the iobench modules it imports (`from pkg import submodule` counts the submodule only)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                subs = [f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in mods]
                targets = subs or [module]
            else:
                continue
            graph[name].update(t for t in targets if t in mods and t != name)
    return graph


def unit_of(module: str) -> str:
    """The layer unit a module belongs to: its package under iobench, or the top-level module itself."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_every_module_has_a_layer():
    missing = {unit_of(m) for m in modules()} - set(RANK)
    assert not missing, f"add {sorted(missing)} to LAYERS in tests/test_layers.py"


def test_imports_run_down_the_layers():
    upward = [
        f"{source} imports {target}"
        for source, targets in imports(modules()).items()
        for target in targets
        if unit_of(source) != unit_of(target) and RANK[unit_of(target)] >= RANK[unit_of(source)]
    ]
    assert not upward, "\n".join(sorted(upward))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in list(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_modules_import_each_other_in_a_circle():
    assert cycles(imports(modules())) == []


def test_the_checks_can_fail():
    """The rules above are only worth something if they catch what they are written for."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    graph = imports(modules())
    assert "iobench.storage.local.page_cache" in graph["iobench.data.writing"]  # the reader sees real imports
    assert RANK[unit_of("iobench.data.writing")] > RANK[unit_of("iobench.storage.local.page_cache")]


def long_functions(source: str, limit: int = 80) -> list[str]:
    """Functions (methods included) over `limit` lines."""
    functions = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return [f"{n.name}: {n.end_lineno - n.lineno + 1}" for n in functions if n.end_lineno - n.lineno + 1 > limit]


def test_modules_stay_small_and_functions_short():
    """The re-housing's limits: no module over 400 lines, no function over 80 anywhere in iobench/ (the check covered
    cli/ only, and an 85-line function of report/warnings.py passed)."""
    long_modules = [
        f"{name}: {len(path.read_text().splitlines())}"
        for name, path in modules().items()
        if len(path.read_text().splitlines()) > 400
    ]
    assert not long_modules, long_modules
    found = {name: hits for name, path in modules().items() if (hits := long_functions(path.read_text()))}
    assert not found, found
    assert long_functions("def f():\n" + "    x = 1\n" * 80) == ["f: 81"]  # the check can fail


def test_the_checkpoint_command_parses_and_prints_only():
    """cli/checkpoint.py converts the values, calls the session and prints: no function of it over 40 lines (its
    session ran in the command, 118-152 of the file, before checkpoint/session.py)."""
    assert long_functions((ROOT / "iobench" / "cli" / "checkpoint.py").read_text(), limit=40) == []


# What the command line may import: it converts values, calls one session and prints. The sessions, the plan, the
# reports and the records are its to use, with the small shared modules; never what measures or reads (storage,
# loaders, formats, measuring) nor checkpoint's insides (its session only, and its registry for --help; feed's
# workloads likewise). `data` holds
# the data commands' own sessions (prepare, verify, info) and `system.signals`/`system.ranks` the entry point's signal
# and lifeline plumbing.
CLI_MAY_IMPORT = (
    "iobench.cli",
    "iobench.plan",
    "iobench.run",
    "iobench.report",
    "iobench.results",
    "iobench.sessions",
    "iobench.checkpoint.libraries",
    "iobench.checkpoint.defaults",
    "iobench.feed.workloads",
    "iobench.feed.defaults",
    "iobench.data",
    "iobench.system.signals",
    "iobench.system.ranks",
    "iobench.choices",
    "iobench.errors",
    "iobench.units",
    "iobench.progress",
    "iobench.events",
    "iobench.settings",
    "iobench.torchrun_env",
    "iobench.judge",
)


def cli_imports_outside(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} imports {target}"
        for source, targets in graph.items()
        if source.startswith("iobench.cli")
        for target in targets
        if target != "iobench" and not target.startswith(CLI_MAY_IMPORT)
    )


def test_the_command_line_imports_only_sessions_plans_reports_and_records():
    assert cli_imports_outside(imports(modules())) == []
    assert cli_imports_outside({"iobench.cli.run": {"iobench.storage.remote", "iobench.plan.place"}}) == [
        "iobench.cli.run imports iobench.storage.remote"
    ]  # the check can fail


def long_classes(source: str, limit: int = 40) -> list[str]:
    """Classes defined at a module's top level over `limit` lines (decorators included)."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if node.end_lineno - start + 1 > limit:
                found.append(f"{node.name}: {node.end_lineno - start + 1}")
    return found


def test_packages_name_their_modules_instead_of_holding_classes():
    """A package's `__init__.py` re-exports; a class of more than 40 lines lives in a module whose name says what
    it holds (Storage in storage/base.py, ObjectStorage in storage/remote/objects.py, ...)."""
    found = {name: long_classes(path.read_text()) for name, path in modules().items() if path.name == "__init__.py"}
    assert not {k: v for k, v in found.items() if v}
    assert long_classes("class A:\n" + "    x = 1\n" * 40) == ["A: 41"]  # the check can fail


# Where a loader may be named: its own package, the code templates tune pastes and the defaults
NAMING_LOADERS = ("iobench.loaders", "iobench.plan.paste", "iobench.plan.selection")


def loader_names_used(source: str, names: frozenset[str]) -> list[str]:
    """`LoaderName.X` (parsing aside), comparisons with a loader's name as a string, and tuples, lists and sets of
    loader names (`HOLDS_THE_DATASET = ("preload", "device-read")` passed the comparison check), by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "LoaderName":
            if node.attr != "parse":
                found.append(f"{node.lineno}: LoaderName.{node.attr}")
        elif isinstance(node, ast.Compare):
            for part in ast.walk(node):
                if isinstance(part, ast.Constant) and part.value in names:
                    found.append(f"{node.lineno}: compares with {part.value!r}")
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            named = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
            if named:
                found.append(f"{node.lineno}: names {', '.join(map(repr, named))}")
    return found


def test_loaders_are_asked_what_they_can_do_not_named():
    """A new loader is its module and its registry entry: no other module names one (issue 62)."""
    from iobench.loaders import LOADERS

    names = frozenset(n.value for n in LOADERS)
    found = {
        name: hits
        for name, path in modules().items()
        if not name.startswith(NAMING_LOADERS) and (hits := loader_names_used(path.read_text(), names))
    }
    assert not found
    assert loader_names_used('if c.loader == "native": pass\nx = LoaderName.RAY\nH = ("preload", "x")', names) == [
        "1: compares with 'native'",
        "2: LoaderName.RAY",
        "3: names 'preload'",
    ]  # the check can fail


def _mentions_median(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and "median" in n.attr) or (isinstance(n, ast.Name) and "median" in n.id)
        for n in ast.walk(node)
    )


def median_verdicts(source: str) -> list[str]:
    """Where a median is compared with another figure (a guard against a constant, `median > 0`, is not) or things are
    ordered by a median (`sorted`, `.sort`, `max` or `min` with a key that reads one)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and not all(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops):
            sides = [node.left, *node.comparators]
            if any(map(_mentions_median, sides)) and not any(isinstance(s, ast.Constant) for s in sides):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            keyed = [k.value for k in node.keywords if k.arg == "key"]
            if name in ("sorted", "sort", "max", "min") and any(map(_mentions_median, keyed)):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_median_is_compared_or_ranked_outside_the_judgement():
    """Issue 93: whether a figure wins, ties or is suspect is decided in `iobench.judge` alone: outside it no median is
    compared with another figure and nothing is ordered by one (tune's ranking and the epoch times' checks were)."""
    found = {
        name: hits
        for name, path in modules().items()
        if not name.startswith("iobench.judge") and (hits := median_verdicts(path.read_text()))
    }
    assert not found, found
    # the check can fail
    assert median_verdicts("x = sorted(cs, key=lambda c: c.median)\ny = a.median > b.median\nz = m.median > 0") == [
        "1: sorted(cs, key=lambda c: c.median)",
        "2: a.median > b.median",
    ]
