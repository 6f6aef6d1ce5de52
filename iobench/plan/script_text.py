"""The parts every script `tune` pastes shares: its imports as ruff sorts them, literals as ruff writes them, the
user's step, and the `__main__` that times a few epochs as tune timed them (so the figure can be checked on the spot).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WARM_UP_S = 2.0  # the pasted script's untimed epochs last at least this (and one epoch)
_STANDARD = {"collections.abc", "statistics", "sys", "time"}  # what the scripts import of the standard library


def import_block(lines: list[str]) -> list[str]:
    """Import lines as ruff sorts them: the standard library, other packages, then iobench, a blank line between;
    in each, `import x` lines before `from x import y` lines, by module; names imported from one module merged."""
    merged: dict[str, set[str]] = {}
    plain_imports: set[str] = set()
    for line in (x.strip() for x in lines if x.strip()):
        if line.startswith("from "):
            module, _, names = line[5:].partition(" import ")
            merged.setdefault(module, set()).update(n.strip() for n in names.split(","))
        else:
            plain_imports.add(line[7:])
    sections: list[list[str]] = [[], [], []]

    def section(module: str) -> list[str]:
        root = module.split(".")[0]
        return sections[0] if module in _STANDARD or root in _STANDARD else sections[2 if root == "iobench" else 1]

    for module in sorted(plain_imports):
        section(module).append(f"import {module}")
    for module in sorted(merged):
        section(module).append(f"from {module} import {', '.join(sorted(merged[module]))}")
    out: list[str] = []
    for lines_of in (x for x in sections if x):
        out += ([""] if out else []) + lines_of
    return out


def py_literal(value: Any) -> str:
    """A literal as ruff format writes it (double quotes): the pasted code passes the user's formatter as is."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


LINE = 88  # what `ruff format` and black write by default: the pasted code passes the user's formatter as it is


def fitted(indent: int, head: str, args: list[str]) -> list[str]:
    """A call `head(args)` as ruff format writes it: on one line where it fits, else its arguments on one line
    inside it, else one argument a line with a trailing comma."""
    pad = " " * indent
    if len(one := f"{pad}{head}({', '.join(args)})") <= LINE:
        return [one]
    if len(inner := f"{pad}    {', '.join(args)}") <= LINE:
        return [f"{pad}{head}(", inner, f"{pad})"]
    return [f"{pad}{head}(", *(f"{pad}    {a}," for a in args), f"{pad})"]


def tidy(lines: list[str]) -> str:
    """The lines as a file: at most two blank lines in a row (the optional parts leave some), one newline at its
    end."""
    out: list[str] = []
    for line in lines:
        if line == "" and len(out) >= 2 and out[-1] == "" and out[-2] == "":
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def step_parts(
    step: str, folder: Path, features_per_sample: int, n_classes: int, non_blocking: bool
) -> tuple[list[str], list[str], list[str]]:
    """The step tune measured with, as the script's (imports, definitions, lines in the loop): the user's own
    function imported from where tune imported it, iobench's stand-in, or none (the photos' search measured 137
    images/s with the user's step; its script left the step out)."""
    if step == "none":
        return [], [], []
    call = [
        f"            labels = labels.to(DEVICE, non_blocking={non_blocking})",
        "            step(features, labels)",
    ]
    if ":" in step and not step.startswith("sleep:"):
        module, _, function = step.partition(":")
        lines = [
            f"# your step, from where {module} was imported",
            f"sys.path.insert(0, {py_literal(str(folder.resolve()))})",
            f"from {module} import {function} as step  # noqa: E402",
            "",
        ]
        return ["import sys"], lines, call
    lines = [
        f"# iobench's stand-in step {step}, as tune ran it",
        f"step = stand_in_step({py_literal(step)}, {features_per_sample}, {n_classes}, DEVICE)",
        "",
    ]
    return ["from iobench.api import stand_in_step"], lines, call


def timing_main(
    epochs: int, measured: str, unpack: str, move: str, on_device: str | None = None, step: list[str] | None = None
) -> list[str]:
    """The script's `__main__`: untimed warm-up epochs (workers start, the page cache fills, and a fresh process's
    allocator settles: its first few hundred batches of 1 MB read 3x slower, glibc trimming and growing its heap for
    each), at least one and at least WARM_UP_S, then a few epochs timed as tune timed them (the step it ran with
    included), the clock stopped after the device is done, and their median beside tune's figure (one epoch alone
    falls outside tune's spread of several by chance). The warm-up is said in one line (a short epoch's script printed
    about 100 "warm-up:" lines)."""
    return [
        "def one_epoch(loader) -> tuple[int, float]:",
        '    """Samples delivered and seconds, the clock stopped once the device is done."""',
        "    start, seen = time.perf_counter(), 0",
        "    for batch in loader:",
        f"        {unpack}",
        f"        {move}",
        *(["        features = augment(features)"] if on_device else []),
        *(line[4:] for line in (step or [])),
        "        seen += len(features)",
        '    if DEVICE.type == "cuda":',
        "        torch.cuda.synchronize()",
        "    return seen, time.perf_counter() - start",
        "",
        "",
        'if __name__ == "__main__":',
        f"    TUNE = {py_literal(measured)}",
        "    loader = make_loader()",
        *([f"    augment = device_transform(DATASET, {py_literal(on_device)})"] if on_device else []),
        "    # untimed, as tune's were: workers start, the page cache fills, the allocator settles",
        f"    warm_until, warmed = time.perf_counter() + {WARM_UP_S:g}, 0",
        "    while True:",
        "        seen, seconds = one_epoch(loader)",
        "        warmed += 1",
        "        if time.perf_counter() >= warm_until:",
        "            break",
        '    print(f"warm-up: {warmed} untimed epoch(s), the last {seconds:.2f} s")',
        "    rates = []",
        f"    for epoch in range(1, {max(3, epochs) + 1}):",
        "        seen, seconds = one_epoch(loader)",
        "        rates.append(seen / seconds)",
        '        print(f"epoch {epoch}: {seen} samples, {seconds:.2f} s, {rates[-1]:,.0f}/s")',
        "    median = statistics.median(rates)",
        '    print(f"median of the timed epochs: {median:,.0f} samples/s; tune: {TUNE}")',
    ]
