"""`iobench checkpoint`'s records read back (`iobench.results.checkpoint_record`): `report` and `compare` read them
here; a line that is not one is skipped and named, as run records are."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from iobench.errors import IobenchError
from iobench.results.checked import RecordError
from iobench.results.checkpoint_record import KINDS, CheckpointKills, CheckpointTrial, checkpoint_record
from iobench.results.store import json_lines


@dataclass
class CheckpointFile:
    trials: list[CheckpointTrial] = field(default_factory=list)  # saves and restores
    kills: list[CheckpointKills] = field(default_factory=list)  # kill-test counts, one per library and run
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
        if problem:
            loaded.skipped.append(f"{path}:{number}: {problem}; skipped")
            continue
        try:
            record = checkpoint_record(value)
        except (RecordError, RecursionError, ValueError) as exc:
            loaded.skipped.append(f"{path}:{number}: not a checkpoint record ({str(exc)[:120]}); skipped")
            continue
        (loaded.trials if isinstance(record, CheckpointTrial) else loaded.kills).append(record)
    return loaded


def label(key: tuple) -> str:
    library, params, layout, op, cache, ranks = key
    what = f"{op} {cache}" if cache else op
    return f"{library}{f' x{ranks} ranks' if ranks > 1 else ''} {params:.3g} params {layout} {what}"


def seconds_by_key(trials: list[CheckpointTrial]) -> dict[tuple, list[float]]:
    """Each measurement's seconds over its rounds (a save's until durable, a restore's until the last byte)."""
    found: dict[tuple, list[float]] = {}
    for r in trials:
        found.setdefault(r.key(), []).append(r.timed_seconds)
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
        a, b = statistics.median(self.a), statistics.median(self.b)
        if a <= 0 or b <= 0:
            return "not comparable (a time of 0 s)"
        return f"{a / b:.2f}x as fast" if a >= b else f"{b / a:.2f}x as slow"


def compare_checkpoints(a: CheckpointFile, b: CheckpointFile) -> tuple[list[Change], int, int]:
    """The measurements both files hold, with their rounds' seconds; how many only A and only B hold."""
    sa, sb = seconds_by_key(a.trials), seconds_by_key(b.trials)
    common = [k for k in sa if k in sb]
    return [Change(k, sa[k], sb[k]) for k in common], len(sa) - len(common), len(sb) - len(common)


def range_text(values: list[float]) -> str:
    middle = statistics.median(values)
    return f"{middle:.3f} s" + (f" [{min(values):.3f}-{max(values):.3f}]" if len(values) > 1 else "")
