"""`compare --rerun A B`: the configurations two results files recorded, measured again in turn and judged in pairs.

Two records made minutes or days apart differ by the drift between them as much as by anything changed: on this
project's shared 2-core machines one configuration moved 27% between records 20-60 s apart, quiet, and no change is
ever called beside other programs. Measured again round by round in a fresh random order, the ratio within each
round cancels a drift that falls on both (`iobench.judge.change.paired_change`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from iobench.errors import IobenchError
from iobench.events import Events
from iobench.judge.change import PAIRS_NEEDED, Change, paired_change
from iobench.results.record import RunRecord

MAX_RERUN_RUNS = 100  # rounds a rerun takes at most


@dataclass(frozen=True)
class RerunRequest:
    """The two results files, the rounds each pair of configurations is measured in, and where the new records go."""

    a: Path
    b: Path
    runs: int = PAIRS_NEEDED
    results: Path = Path("results") / "rerun.jsonl"

    def __post_init__(self) -> None:
        if not PAIRS_NEEDED <= self.runs <= MAX_RERUN_RUNS:
            raise IobenchError(
                f"--runs must be {PAIRS_NEEDED}..{MAX_RERUN_RUNS} for --rerun (fewer rounds cannot bound a paired "
                f"ratio at 95%), got {self.runs}"
            )


@dataclass(frozen=True)
class Rerun:
    """One pair: A's and B's configuration as recorded, their new records measured in turn, and B against A."""

    label: str
    a: RunRecord
    b: RunRecord
    change: Change


@dataclass
class RerunOutcome:
    reruns: list[Rerun] = field(default_factory=list)
    only_a: int = 0  # configurations left out: in one file only
    only_b: int = 0


def rerun_session(request: RerunRequest, events: Events) -> RerunOutcome:
    """Each pair of configurations (those both files hold, or the one each holds) measured again in turn, `runs`
    rounds, its records appended to `results`, judged by the pairs."""
    from iobench.plan.place import RunPlace
    from iobench.plan.recorded import run_config_of
    from iobench.sessions.run import RunRequest, run_session

    pairs, only_a, only_b = rerun_pairs(request.a, request.b)
    outcome = RerunOutcome(only_a=only_a, only_b=only_b)
    for k, (ra, rb) in enumerate(pairs):
        if not ra.dataset.data_dir:  # records made before the folder was stored
            raise IobenchError(f"{ra.label}: its record does not say where its dataset is; run it again with `run`")
        configs = (run_config_of(ra.config, request.runs), run_config_of(rb.config, request.runs))
        place = RunPlace(Path(ra.dataset.data_dir), ra.config.dataset, ra.config.device, request.results)
        events.say(
            f"pair {k + 1} of {len(pairs)}: {ra.label} (A) and {rb.label} (B) measured again, "
            f"{request.runs} rounds in turn"
        )
        measured = run_session(RunRequest(configs, place), events)
        if measured is None or len(measured.records) != 2:
            raise IobenchError(f"{ra.label} and {rb.label}: the rerun did not measure both")
        new_a, new_b = measured.records
        outcome.reruns.append(Rerun(pair_label(ra, rb), new_a, new_b, paired_change(new_a, new_b)))
    return outcome


def rerun_pairs(a: Path, b: Path) -> tuple[list[tuple[RunRecord, RunRecord]], int, int]:
    """The configurations to measure again: each one both files hold (its latest record in each); else, where each
    file holds one configuration, that one of each; the counts of those left out."""
    from iobench.results.store import latest_per_config, load_records

    left, right = (latest_per_config(load_records(path).records) for path in (a, b))
    if not left or not right:
        raise IobenchError(f"{a if not left else b} holds no run record to measure again")
    keys = {r.identity() for r in right}
    common = [(ra, next(rb for rb in right if rb.identity() == ra.identity())) for ra in left if ra.identity() in keys]
    if common:
        return common, len(left) - len(common), len(right) - len(common)
    if len(left) == 1 and len(right) == 1:
        ra, rb = left[0], right[0]
        if (ra.dataset.data_dir, ra.config.dataset, ra.config.device) != (
            rb.dataset.data_dir,
            rb.config.dataset,
            rb.config.device,
        ):
            raise IobenchError(
                f"A read {ra.config.dataset} on {ra.config.device} and B {rb.config.dataset} on {rb.config.device}: "
                "--rerun measures two configurations of one dataset on one device in turn"
            )
        return [(ra, rb)], 0, 0
    raise IobenchError(
        f"{a} ({len(left)} configurations) and {b} ({len(right)}) have none in common: --rerun measures again the "
        "configurations both hold, or the one configuration each holds"
    )


def pair_label(a: RunRecord, b: RunRecord) -> str:
    """A pair as the table names it: the configuration, and where B's differs, each field B changed."""
    from dataclasses import fields

    def differences(x: object, y: object) -> list[str]:
        return [f"{f.name}={getattr(y, f.name)}" for f in fields(x) if getattr(x, f.name) != getattr(y, f.name)]

    changed = differences(a.config.settings, b.config.settings) + [
        part for part in differences(a.config, b.config) if not part.startswith("settings=")
    ]
    return a.describe() + (f"; B: {', '.join(changed)}" if changed else "")
