"""`iobench checkpoint`'s records read back: each line of its results file is one save or restore (`kind`
"checkpoint") or one library's kill-test counts (`kind` "checkpoint-kill"). `report` and `compare` read them here:
a line that is not one is skipped and named, as run records are."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from iobench.errors import IobenchError
from iobench.results.store import json_lines

KINDS = ("checkpoint", "checkpoint-kill")
MEASURED = "checkpoint"
KILLED = "checkpoint-kill"


@dataclass
class CheckpointFile:
    trials: list[dict] = field(default_factory=list)  # saves and restores
    kills: list[dict] = field(default_factory=list)  # kill-test counts, one per library and run
    skipped: list[str] = field(default_factory=list)


def holds_checkpoints(path: Path) -> bool:
    """Whether the file's first readable record is a checkpoint's (a results file holds one kind); a file that
    cannot be read is not (the reader of run records then says why, in one line)."""
    try:
        for _, value, problem in json_lines(path):
            if not problem:
                return isinstance(value, dict) and value.get("kind") in KINDS
    except IobenchError:
        return False
    return False


def load_checkpoints(path: Path) -> CheckpointFile:
    """Every checkpoint record of the file; other lines skipped with the reason."""
    loaded = CheckpointFile()
    for number, value, problem in json_lines(path):
        why = problem or _unreadable(value)
        if why:
            loaded.skipped.append(f"{path}:{number}: {why}; skipped")
        elif value["kind"] == MEASURED:
            loaded.trials.append(value)
        else:
            loaded.kills.append(value)
    return loaded


_NUMBERS = {MEASURED: ("params", "state_bytes", "seconds", "bytes_on_disk"), KILLED: ("params", "kills")}


def _unreadable(value: object) -> str:
    if not isinstance(value, dict) or value.get("kind") not in KINDS:
        return "not a checkpoint record (no checkpoint kind)"
    if not isinstance(value.get("library"), str):
        return "not a checkpoint record (no library)"
    for key in _NUMBERS[value["kind"]]:
        number = value.get(key)
        if isinstance(number, bool) or not isinstance(number, int | float) or not number >= 0:
            return f"not a checkpoint record ({key} is not a number >= 0)"
    if value["kind"] == MEASURED and value.get("op") not in ("save", "restore"):
        return "not a checkpoint record (op is neither save nor restore)"
    if value["kind"] == KILLED and not isinstance(value.get("counts"), dict):
        return "not a checkpoint record (no counts)"
    return ""


def trial_key(r: dict) -> tuple:
    """What makes two trials the same measurement: the library, the state, the operation and its cache."""
    return (r["library"], r["params"], r.get("layout"), r["op"], r.get("cache"), r.get("ranks", 1))


def label(key: tuple) -> str:
    library, params, layout, op, cache, ranks = key
    what = f"{op} {cache}" if cache else op
    return f"{library}{f' x{ranks} ranks' if ranks > 1 else ''} {params:.3g} params {layout} {what}"


def seconds_by_key(trials: list[dict]) -> dict[tuple, list[float]]:
    """Each measurement's seconds over its rounds (a save's until durable, a restore's until the last byte)."""
    found: dict[tuple, list[float]] = {}
    for r in trials:
        value = r.get("durable_seconds", r["seconds"]) if r["op"] == "save" else r["seconds"]
        found.setdefault(trial_key(r), []).append(float(value))
    return found


@dataclass(frozen=True)
class Change:
    key: tuple
    a: list[float]
    b: list[float]

    @property
    def verdict(self) -> str:
        """ "same" where the rounds' ranges overlap, else B's median against A's as a speed ratio."""
        if min(self.b) <= max(self.a) and min(self.a) <= max(self.b):
            return "same (the rounds' ranges overlap)"
        ratio = statistics.median(self.a) / statistics.median(self.b)
        return f"{ratio:.2f}x as fast" if ratio >= 1 else f"{1 / ratio:.2f}x as slow"


def compare_checkpoints(a: CheckpointFile, b: CheckpointFile) -> tuple[list[Change], int, int]:
    """The measurements both files hold, with their rounds' seconds; how many only A and only B hold."""
    sa, sb = seconds_by_key(a.trials), seconds_by_key(b.trials)
    common = [k for k in sa if k in sb]
    return [Change(k, sa[k], sb[k]) for k in common], len(sa) - len(common), len(sb) - len(common)


def range_text(values: list[float]) -> str:
    middle = statistics.median(values)
    return f"{middle:.3f} s" + (f" [{min(values):.3f}-{max(values):.3f}]" if len(values) > 1 else "")
