"""What a checkpoint session will do, step by step, and how long it should take: each size's rounds, each library's
save in every save mode and its restores; the kill test's kills. The time left after each step is the estimate of
the steps ahead at the pace the finished ones kept against theirs (trusted as far as they weigh: `pace_of`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from iobench.checkpoint.state import StateSpec
from iobench.progress import minutes, pace_of

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
    save_mode: str  # a save's; a restore's: the mode of the checkpoint it reads (the last saved)
    cache: str | None = None

    @property
    def label(self) -> str:
        what = f"{self.op} {self.cache}" if self.cache else f"{self.op} {self.save_mode}"
        return f"round {self.round + 1}: {self.library} {what}"


def planned(request: CheckpointRequest, libraries: list[Library]) -> list[Step]:
    steps = []
    for spec in request.specs:
        for round_ in range(request.trials):
            for lib in libraries:
                steps += [Step(spec, round_, lib.name, "save", mode) for mode in request.save_modes]
                steps += [Step(spec, round_, lib.name, "restore", request.save_modes[-1], c) for c in request.caches]
    return steps


@dataclass
class Estimate:
    """Each step's estimated seconds in order (trials, then kills), and how the finished ones went."""

    ahead: list[float]
    k: int = 0
    took: float = 0.0
    estimated: float = 0.0
    left: list[float] = field(default_factory=list)

    def total_words(self) -> str:
        return minutes(sum(self.ahead))

    def finished(self, took: float) -> str:
        """One step ended after `took` seconds: the time left, in words ("" once none is)."""
        if self.k < len(self.ahead):
            self.estimated += self.ahead[self.k]
            self.k += 1
        self.took += took
        rest = sum(self.ahead[self.k :])
        if rest <= 0:
            return ""
        self.left.append(pace_of(self.took, self.estimated, rest) * rest)
        return f"about {minutes(self.left[-1])} left"


def estimate_of(steps: list[Step], request: CheckpointRequest, kill_runs: int) -> Estimate:
    def gb(spec: StateSpec) -> float:
        return spec.state_bytes / 1e9

    seconds = []
    for s in steps:
        saves = 2 * SAVE_S_PER_GB if s.op == "save" else RESTORE_S_PER_GB + MAKE_S_PER_GB
        seconds.append(PROCESS_S + gb(s.spec) * (MAKE_S_PER_GB + saves))
    kill = request.kill_spec or request.specs[0]
    # a kill: step N saved (a process), N+1 killed within a save's time, then a restore in a third process
    per_kill = 3 * PROCESS_S + gb(kill) * (3 * MAKE_S_PER_GB + 1.55 * SAVE_S_PER_GB + RESTORE_S_PER_GB)
    return Estimate(seconds + [per_kill] * (kill_runs * request.kill_test))
