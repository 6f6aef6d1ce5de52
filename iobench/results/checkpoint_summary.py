"""What `iobench checkpoint`'s records say, per library and save mode: medians of the rounds (the first save and the
steady one, until returned, done and durable; restores warm and cold), GB/s, peak memory, bytes stored, whether it came
back exact, and what the kill tests counted (a clean error loses step N too). The answer they give is the judgement's
(`iobench.judge.checkpoints`). Read by the session (the console) and by `report` alike."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from iobench.results.checkpoint_record import KILL_OUTCOMES, LOST, CheckpointKills, CheckpointTrial


@dataclass(frozen=True)
class LibraryRow:
    who: str  # the library, with its ranks
    library: str
    saver: str  # whose save wrote its checkpoint (torch-mmap reads torch's): the kill test's entry
    save_mode: str
    ceiling: bool
    target: str
    state_bytes: int
    bytes_stored: int
    first_durable_s: float | None
    save_s: float | None
    done_s: float | None
    durable_s: float | None
    warm_s: float | None
    cold_s: float | None
    restore_peak: int | None
    exact: bool | None
    busy: float | None  # the most cores other programs used around any of its trials
    onto_device: bool | None = None
    step: str = "none"  # the training step run beside the saves (--step)
    blocked_s: float | None = None
    background_s: float | None = None
    step_rate: float | None = None  # steps/s with no save
    step_rate_during: float | None = None  # steps/s while an asynchronous save ran
    durable_rounds: dict[int, float] = field(default_factory=dict)
    restore_rounds: dict[int, float] = field(default_factory=dict)  # cold where measured, else warm
    # what its trials' processes used and waited for a CPU (seconds, summed), and the session they were taken in turn
    # in ("": not recorded): rows of one session pair by round
    cpu_s: float = 0.0
    cpu_wait_s: float = 0.0
    turn_session: str = ""

    @property
    def restore_s(self) -> float | None:
        return self.cold_s if self.cold_s is not None else self.warm_s

    @property
    def restore_word(self) -> str:
        return "cold" if self.cold_s is not None else "warm"

    def gb_per_s(self, seconds: float | None) -> float | None:
        return self.bytes_stored / seconds / 1e9 if seconds else None

    @property
    def label(self) -> str:
        return f"{self.who} {self.save_mode}"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def rows_of(trials: list[CheckpointTrial]) -> list[LibraryRow]:
    """One row per library and save mode, in the order first measured; a restore row of the library is shared by its
    save modes (a restore reads the same files whichever way they were put in place)."""
    rows = []
    for who, mode, step in dict.fromkeys((r.who, r.save_mode, r.step) for r in trials if r.op == "save"):
        saves = [r for r in trials if r.who == who and r.op == "save" and r.save_mode == mode and r.step == step]
        restores = [r for r in trials if r.who == who and r.op == "restore"]
        rows.append(_row(who, mode, saves, restores))
    return rows


def _row(who: str, mode: str, saves: list[CheckpointTrial], restores: list[CheckpointTrial]) -> LibraryRow:
    def of(records: list[CheckpointTrial], key: str, cache: str | None = None) -> list[float]:
        return [v for r in records if r.cache == cache and (v := getattr(r, key)) is not None]

    first = saves[0]
    checked = [r.exact for r in restores if r.exact is not None]
    seen = [r.host.busy for r in (*saves, *restores)]
    cache = "cold" if any(r.cache == "cold" for r in restores) else "warm"
    return LibraryRow(
        who=who,
        library=first.library,
        saver=first.saver or first.library,
        save_mode=mode,
        ceiling=first.ceiling,
        target=first.target,
        state_bytes=first.state_bytes,
        bytes_stored=first.bytes_on_disk,
        first_durable_s=_median(of(saves, "first_durable_seconds")),
        save_s=_median(of(saves, "seconds")),
        done_s=_median(of(saves, "done_seconds")),
        durable_s=_median(of(saves, "durable_seconds")),
        warm_s=_median(of(restores, "seconds", "warm")),
        cold_s=_median(of(restores, "seconds", "cold")),
        restore_peak=max((r.peak_rss_bytes for r in restores if r.peak_rss_bytes), default=None),
        exact=all(checked) if checked else None,
        busy=None if any(b is None for b in seen) else max(seen, default=None),  # type: ignore[type-var]
        onto_device=next((r.onto_device for r in restores if r.onto_device is not None), None),
        step=first.step,
        blocked_s=_median(of(saves, "blocked_seconds")),
        background_s=_median(of(saves, "background_seconds")),
        step_rate=_median(of(saves, "step_rate")),
        step_rate_during=_median(of(saves, "step_rate_during")),
        durable_rounds={r.trial: r.timed_seconds for r in saves},
        restore_rounds={r.trial: r.seconds for r in restores if r.cache == cache},
        cpu_s=sum(x for r in (*saves, *restores) for x in r.waits.unit_cpu_s),
        cpu_wait_s=sum(x for r in (*saves, *restores) for x in r.waits.unit_cpu_wait_s),
        turn_session=_one({r.waits.turn_session for r in (*saves, *restores)}),
    )


def _one(sessions: set[str]) -> str:
    """The session all of a row's trials were taken in turn in ("" where they were not, or not all in one)."""
    return next(iter(sessions)) if len(sessions) == 1 else ""


def kill_counts(records: list[CheckpointKills]) -> dict[tuple[str, str], dict[str, int]]:
    """Each library's and mode's kill-test counts, summed over the tests of the file."""
    found: dict[tuple[str, str], dict[str, int]] = {}
    for r in records:
        counts = found.setdefault((r.library, r.save_mode), dict.fromkeys(KILL_OUTCOMES, 0))
        for outcome in KILL_OUTCOMES:
            counts[outcome] += r.counts.get(outcome, 0)
    return found


def lost(counts: dict[str, int]) -> int:
    return sum(counts.get(o, 0) for o in LOST)
