"""One session contract: every command that measures or writes builds a Request from its parsed options and hands it
to one session, `session(request, events) -> Outcome`; the command line parses and prints, and never hands its
locals on. Read from the source with `ast` (nothing is run)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import iobench.sessions

CLI = Path(__file__).resolve().parents[2] / "iobench" / "cli"

# each command's function, by the name its module defines it under (run --dataset-factory has a function of its own)
COMMANDS = {
    "run": ("run.py", "run_cmd"),
    "run --dataset-factory": ("dataset_factory.py", "run_factory_cmd"),
    "sweep": ("sweep.py", "sweep_cmd"),
    "tune": ("tune.py", "tune_cmd"),
    "checkpoint": ("checkpoint.py", "checkpoint_cmd"),
    "limits": ("machine.py", "limits_cmd"),
    "doctor": ("machine.py", "doctor_cmd"),
    "prepare": ("data.py", "prepare_cmd"),
    "upload": ("serve.py", "upload_cmd"),
    "feed": ("feed.py", "feed_cmd"),
}
REQUEST_MAKER = re.compile(r"(Request|_request|Options)$")


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def contract_breaches(source: str, function: str) -> list[str]:
    """What in `function` breaks the contract: not one session called, its request not made by a Request's
    constructor or the command's converter, `locals()` handed on."""
    tree = ast.parse(source)
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    if not found:
        return [f"{function}: not defined"]
    calls = [n for n in ast.walk(found[0]) if isinstance(n, ast.Call)]
    made = {
        target.id
        for n in ast.walk(found[0])
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and REQUEST_MAKER.search(_name(n.value.func))
        for target in n.targets
        if isinstance(target, ast.Name)
    }
    breaches = [f"{function}: calls locals()" for c in calls if _name(c.func) == "locals"]
    sessions = [c for c in calls if _name(c.func).endswith("_session")]
    if len(sessions) != 1:
        return [*breaches, f"{function}: calls {len(sessions)} sessions, not one"]
    first = sessions[0].args[0] if sessions[0].args else None
    by_maker = isinstance(first, ast.Call) and REQUEST_MAKER.search(_name(first.func))
    if not (by_maker or (isinstance(first, ast.Name) and first.id in made)):
        breaches.append(f"{function}: its session's request is not made by a Request or the command's converter")
    return breaches


def test_every_command_builds_a_request_and_calls_one_session():
    breaches = [
        f"{command}: {b}"
        for command, (module, function) in COMMANDS.items()
        for b in contract_breaches((CLI / module).read_text(), function)
    ]
    assert breaches == []


def test_the_contract_check_can_fail():
    handed_on = "def cmd(a):\n    request = checkpoint_request({**locals()})\n    checkpoint_session(request, None)\n"
    assert contract_breaches(handed_on, "cmd") == ["cmd: calls locals()"]
    inline = "def cmd(a, b):\n    measure_session(a, b, None)\n"
    assert contract_breaches(inline, "cmd") == [
        "cmd: its session's request is not made by a Request or the command's converter"
    ]
    none = "def cmd(a):\n    run(a)\n"
    assert contract_breaches(none, "cmd") == ["cmd: calls 0 sessions, not one"]


def test_no_command_hands_its_locals_on():
    for path in CLI.glob("*.py"):
        calls = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]
        assert not [c for c in calls if _name(c.func) == "locals"], path.name


def test_every_session_takes_a_request_and_events_and_returns_an_outcome():
    """`iobench.sessions`: one module per command, each session `(request, events) -> ...Outcome`."""
    sessions = {}
    for info in pkgutil.iter_modules(iobench.sessions.__path__):
        module = importlib.import_module(f"iobench.sessions.{info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if name.endswith("_session") and function.__module__ == module.__name__:
                sessions[name] = function
    assert set(sessions) >= {
        "run_session",
        "factory_session",
        "sweep_session",
        "tune_session",
        "checkpoint_session",
        "limits_session",
        "doctor_session",
        "prepare_session",
        "upload_session",
        "feed_session",
    }
    for name, function in sessions.items():
        signature = inspect.signature(function)
        assert list(signature.parameters) == ["request", "events"], name
        assert "Outcome" in str(signature.return_annotation), name


def test_no_command_reads_its_options_by_key_from_the_context():
    """Options reach a command as its parameters and typed groups (a PlaceValues, a LoaderSettings), never as
    `ctx.params[...]` by string."""
    for path in CLI.glob("*.py"):
        reads = [
            n
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Attribute) and n.attr == "params" and _name(n.value) == "ctx"
        ]
        assert not reads, f"{path.name}: ctx.params at line {reads[0].lineno}"


def test_each_option_group_is_handed_to_the_command_as_one_typed_value():
    """run's def names its groups (its own options, place, settings, run options) and typer sees each option of
    them."""
    from iobench.cli.run import run_cmd
    from iobench.plan.place import PlaceValues

    seen = inspect.signature(run_cmd).parameters
    assert {"data_dir", "device", "remote", "batch_size", "num_workers", "cache", "torch_threads"} <= set(seen)
    assert not {"place", "settings", "run_options"} & set(seen)
    own = inspect.signature(inspect.unwrap(run_cmd), eval_str=True).parameters
    assert own["place"].annotation is PlaceValues and own["place"].kind is inspect.Parameter.KEYWORD_ONLY
    assert own["settings"].annotation.__name__ == "LoaderSettings" and own["asked"].annotation.__name__ == "RunAsked"
