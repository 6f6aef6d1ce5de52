"""What a checkpoint session will do, step by step, and how long it should take: each size's rounds, each library's
save in every save mode and its restores; the kill test's kills. The time left after each step is what the steps
ahead cost as measured: a step of a kind already done (the same library, operation, save mode and cache; a kill of the
same test) is as long as those were (their median); one of a kind not yet seen is its estimate at the pace its family
(trials, or kills) kept against theirs, trusted as far as they weigh (`pace_of`). One pace for everything said "about
8 min" of a session that took 17, and "about 49 min left" ten minutes into one estimated at 38."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from iobench.checkpoint.state import StateSpec
from iobench.progress import minutes, pace_of
from iobench.results.checkpoint_record import SaveMode

if TYPE_CHECKING:
    from iobench.checkpoint.libraries import Library
    from iobench.checkpoint.request import CheckpointRequest

PROCESS_S = 4.0  # a trial's fresh process: the interpreter, torch and the library imported
MAKE_S_PER_GB = 1.0  # the state made from its seed (and again to check a restore)
SAVE_S_PER_GB = 2.0  # one save until durable, on a disk of about 0.5 GB/s
RESTORE_S_PER_GB = 1.5


@dataclass(frozen=True)
class Step:
    spec: StateSpec
    round: int
    library: str
    op: str  # save | restore
    save_mode: SaveMode  # a save's; a restore's: the mode of the checkpoint it reads (the last saved)
    cache: str | None = None

    @property
    def label(self) -> str:
        what = f"{self.op} {self.cache}" if self.cache else f"{self.op} {self.save_mode}"
        return f"round {self.round + 1}: {self.library} {what}"

    @property
    def kind(self) -> str:
        """Steps of one kind cost the same: the same state, library, operation, save mode and cache."""
        return f"trial:{self.spec.state_bytes} {self.library} {self.op} {self.save_mode} {self.cache}"


def planned(request: CheckpointRequest, libraries: list[Library], session: str = "") -> list[Step]:
    """Each size's rounds, each round every library in turn, in a fresh order a round (from `session`: a library
    never always first, after the same one), its saves then its restores."""
    import random

    steps = []
    for spec in request.specs:
        for round_ in range(request.rounds):
            order = list(libraries)
            if session:
                random.Random(f"{session}:{spec.params}:{round_}").shuffle(order)
            for lib in order:
                steps += [Step(spec, round_, lib.name, "save", mode) for mode in request.save_modes]
                steps += [Step(spec, round_, lib.name, "restore", request.save_modes[-1], c) for c in request.caches]
                if request.restart:
                    steps += [
                        Step(spec, round_, lib.name, "restart", request.save_modes[-1], c) for c in request.caches
                    ]
    return steps


@dataclass
class TimeLeft:
    """Each step's estimated seconds and kind in order (trials, then kills), and how the finished ones went: the
    time left said as each step ends (a run's `iobench.run.estimates.Estimate` is one configuration's range, another
    thing)."""

    ahead: list[float]
    kinds: list[str] = field(default_factory=list)  # "trial:..." or "kill:...": the family before the colon
    k: int = 0
    measured: dict[str, list[float]] = field(default_factory=dict)
    paces: dict[str, list[float]] = field(default_factory=dict)  # family: [took, estimated]
    left: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.kinds:
            self.kinds = ["trial:"] * len(self.ahead)

    def total_words(self) -> str:
        return minutes(sum(self.ahead))

    def parts_words(self) -> str:
        """What the time goes to, in words: the saves, restores and kills (each a fresh process of about PROCESS_S
        before its first byte), then each save mode's share, so a user can see what to drop to fit a budget ("about
        21 min" at 1e6 and 1e7 parameters alike was mostly processes starting)."""
        by_op: dict[str, list[float]] = {}
        by_mode: dict[str, float] = {}
        for seconds, kind in zip(self.ahead, self.kinds, strict=True):
            family, _, rest = kind.partition(":")
            words = rest.split(" ")
            op = "kill test" if family == "kill" else words[2] if len(words) > 2 else "trial"
            by_op.setdefault(op, []).append(seconds)
            if op == "save" or family == "kill":
                mode = words[-1] if family == "kill" else words[3]
                by_mode[mode] = by_mode.get(mode, 0.0) + seconds
        ops = ", ".join(f"{len(x)} {op}s {minutes(sum(x))}" for op, x in by_op.items())
        said = f"{ops} (each a fresh process, about {PROCESS_S:g} s before its first byte)"
        if len(by_mode) > 1:
            said += "; saves and kill tests by save mode: " + ", ".join(f"{m} {minutes(x)}" for m, x in by_mode.items())
        return said

    def finished(self, took: float) -> str:
        """One step ended after `took` seconds: the time left, in words ("" once none is)."""
        if self.k < len(self.ahead):
            kind = self.kinds[self.k]
            self.measured.setdefault(kind, []).append(took)
            pace = self.paces.setdefault(kind.partition(":")[0], [0.0, 0.0])
            pace[0] += took
            pace[1] += self.ahead[self.k]
            self.k += 1
        if self.k >= len(self.ahead):
            return ""
        self.left.append(self.seconds_left())
        return f"about {minutes(self.left[-1])} left"

    def seconds_left(self) -> float:
        """The steps ahead: as their kind measured, else their estimate at their family's pace."""
        unseen: dict[str, float] = {}
        known = 0.0
        for i in range(self.k, len(self.ahead)):
            kind = self.kinds[i]
            if kind in self.measured:
                known += statistics.median(self.measured[kind])
            else:
                family = kind.partition(":")[0]
                unseen[family] = unseen.get(family, 0.0) + self.ahead[i]
        for family, rest in unseen.items():
            took, estimated = self.paces.get(family, [0.0, 0.0])
            known += pace_of(took, estimated, rest) * rest
        return known


def estimate_of(steps: list[Step], request: CheckpointRequest, kills: list[tuple[str, str]]) -> TimeLeft:
    def gb(spec: StateSpec) -> float:
        return spec.state_bytes / 1e9

    seconds = []
    for s in steps:
        if s.op == "save":
            saves = s.save_mode.saves * SAVE_S_PER_GB
        else:  # a restore; a restart also allocates the state and takes a step over it
            saves = (RESTORE_S_PER_GB + MAKE_S_PER_GB) * (2 if s.op == "restart" else 1)
        seconds.append(PROCESS_S + gb(s.spec) * (MAKE_S_PER_GB + saves))
    kill = request.kill_spec or request.specs[0]
    # a kill: step N saved (a process), N+1 killed within a save's time, then a restore in a third process
    per_kill = 3 * PROCESS_S + gb(kill) * (3 * MAKE_S_PER_GB + 1.55 * SAVE_S_PER_GB + RESTORE_S_PER_GB)
    kill_kinds = [f"kill:{name} {mode}" for name, mode in kills for _ in range(request.kill_test)]
    return TimeLeft(seconds + [per_kill] * len(kill_kinds), [s.kind for s in steps] + kill_kinds)
