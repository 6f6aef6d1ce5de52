"""What a `checkpoint --workload` record says, decided from its raw seconds as MLPerf Storage reports a checkpointing
run (Submission_guidelines.md @03ef5ec, 2.2.3): a checkpoint's duration is the slowest rank's, its throughput the
slowest rank's (each rank's bytes over its seconds); beside them the bytes of every rank over the duration, what the
storage took together. Each figure is the median of the checkpoints with its interval (`interval_of`); whether it
would stand as a CLOSED result (2.2.1-2.2.5), and one record against another (`iobench.judge.change`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from iobench.judge.change import DISK_DRIFT, NOT_COMPARABLE, Change, Units, change_of
from iobench.judge.intervals import Interval, interval_of
from iobench.judge.rules import CHECKPOINTS, RUNS, RuleCheck, rules_text
from iobench.results.workload_record import WorkloadRecord

WRITE, READ = "write", "read"
CHECKPOINT_UNITS = Units(
    "GB/s",
    "workload's checkpoints",
    "checkpoints",
    "one checkpoint has no interval (use --rounds 2 or more)",
    DISK_DRIFT,
    "measure both in one session, alternating",
)


@dataclass(frozen=True)
class Phase:
    """The writes or the reads: each checkpoint's duration (the slowest rank's), the slowest rank's GB/s, and every
    rank's bytes over the duration."""

    seconds: list[float]
    rank_gb_per_s: list[float]
    together_gb_per_s: list[float]

    def interval(self, name: str) -> Interval:
        return interval_of(getattr(self, name))


def phase_of(record: WorkloadRecord, phase: str) -> Phase:
    rows = record.write_s if phase == WRITE else record.read_s
    seconds, rank, together = [], [], []
    for k in range(len(rows[0])):
        at = [row[k] for row in rows]
        seconds.append(max(at))
        rank.append(min(b / s for b, s in zip(record.rank_bytes, at, strict=True)) / 1e9)
        together.append(record.checkpoint_bytes / max(at) / 1e9)
    return Phase(seconds, rank, together)


def phase_line(record: WorkloadRecord, phase: str) -> str:
    p = phase_of(record, phase)
    s, r, t = p.interval("seconds"), p.interval("rank_gb_per_s"), p.interval("together_gb_per_s")
    cold = f", cold ({record.cold}: every rank's files out of the page cache)" if phase == READ else ", fsynced"
    return (
        f"{phase} {len(p.seconds)} checkpoints{cold}: {s.median:.2f} s a checkpoint [{s.low:.2f}-{s.high:.2f}], "
        f"{r.median:.2f} GB/s the slowest rank [{r.low:.2f}-{r.high:.2f}], {t.median:.2f} GB/s together"
    )


def answer(record: WorkloadRecord) -> str:
    """The answer in one line: the layout written, then the writes and the reads."""
    scale = "" if record.layers == record.layers_whole else f", {record.layers} of its {record.layers_whole} layers"
    whole = f"{record.whole_bytes / 1e9:,.0f} GB, {record.whole_bytes / 2**30:,.0f} GiB"
    return (
        f"answer: {record.workload}: {ranks_text(record.ranks)} of its {record.layout_ranks}{scale}, "
        f"{record.checkpoint_bytes / 1e9:,.2f} GB a checkpoint (the whole model's {whole}, over "
        f"{record.layout_ranks} ranks); {phase_line(record, WRITE)}; {phase_line(record, READ)}"
    )


def ranks_text(ranks: int) -> str:
    """The first ranks of a layout: `rank 0`, `ranks 0-7`."""
    return "rank 0" if ranks == 1 else f"ranks 0-{ranks - 1}"


def workload_rules(record: WorkloadRecord) -> list[RuleCheck]:
    """MLPerf Storage's CLOSED checkpointing rules against the record."""
    whole = record.layers == record.layers_whole
    writes, reads = len(record.write_s[0]), len(record.read_s[0])
    return [
        RuleCheck("workload", True, f"{record.workload} in its layout ({record.source})"),
        RuleCheck(
            "model",
            whole,
            "every layer"
            if whole
            else f"{record.layers} of {record.layers_whole} layers (--scale); a CLOSED run "
            "writes the whole model (2.2.1)",
        ),
        RuleCheck(
            "ranks",
            record.ranks == record.layout_ranks,
            f"{record.ranks} of the layout's {record.layout_ranks} ranks (MLPerf's subset mode, 2.2.2); a CLOSED run "
            f"writes every rank's share: {record.layout_ranks} processes, at least 4 a host (2.2.1)",
        ),
        RuleCheck("fsync", True, "every file fsynced before its checkpoint's clock stops"),
        RuleCheck("cache", True, f"the reads cold ({record.cold})"),
        RuleCheck(
            "checkpoints",
            writes >= CHECKPOINTS and reads >= CHECKPOINTS,
            f"{writes} written and {reads} read; a CLOSED run writes {CHECKPOINTS} and reads {CHECKPOINTS} (2.2.5)",
        ),
        RuleCheck("runs", False, f"one run; a CLOSED result is the mean of {RUNS} runs (2.2.3)"),
    ]


def workload_rules_line(record: WorkloadRecord) -> str:
    return rules_text(workload_rules(record))


def workload_change(a: WorkloadRecord, b: WorkloadRecord, phase: str) -> Change:
    """B against A, one phase, by each checkpoint's GB/s together; another workload, layers or ranks are not
    comparable (`change_of` says so of the loads)."""
    units_a = phase_of(a, phase).together_gb_per_s
    units_b = phase_of(b, phase).together_gb_per_s
    if a.identity() != b.identity():
        said = "another workload, layers or ranks"
        return Change(NOT_COMPARABLE, None, said, interval_of(units_a), interval_of(units_b))
    return change_of(units_a, units_b, a.host.busy, b.host.busy, CHECKPOINT_UNITS)


def median_seconds(record: WorkloadRecord, phase: str) -> float:
    return statistics.median(phase_of(record, phase).seconds)
