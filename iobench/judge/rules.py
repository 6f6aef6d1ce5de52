"""Whether a feed or checkpoint answer would stand as a CLOSED result under MLPerf Storage's rules, as `mlpstorage
validate` checks a DLIO run's: each rule's verdict and, where it fails, what it would take. The rules are
mlcommons/storage's Submission_guidelines.md (@03ef5ec): for training, the AU a workload keeps (4, 11), the dataset
against the hosts' memory and a warm-up before five runs (6.6), the least dataset (7), and what a CLOSED run may
change (10.1: the dataset's folder and file count, the reader's threads and prefetch; not its format, its data loader,
its batch or its step); for checkpointing (2.2), the llama3 workloads in their parallel layout, fsync on every write,
the cache cleared between the writes and the reads, 10 of each, five runs. iobench is not DLIO, so no iobench answer
is a CLOSED result: the check says how far the question asked is from one."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.judge.feed import fed_count
from iobench.results.checkpoint_summary import LibraryRow
from iobench.results.feed_record import FeedRecord

HOST_MEMORY_MULTIPLIER = 5  # 6.6.2 and 7: the dataset at least 5x the sum of the hosts' memory
MIN_STEPS = 500  # 7: an epoch at least 500 steps of every accelerator's batch
RUNS = 5  # 6.6.1 and 3: a result is the mean of 5 runs, after a warm-up run
CHECKPOINTS = 10  # 2.2.5, Table 3: --num-checkpoints-write and -read, 10 each, not changeable
# 2.2.1, Table 2: each checkpointing workload's whole checkpoint
CHECKPOINT_WORKLOADS = "llama3-8b 105 GB, llama3-70b 912 GB, llama3-405b 5.29 TB, llama3-1t 18 TB"


@dataclass(frozen=True)
class Closed:
    """A workload as its CLOSED definition fixes it (the benchmark's file for it: `source`)."""

    batch_size: int
    compute_s: float
    au: float
    format: str  # the dataset's format: npz, tfrecord, jpeg
    data_loader: str  # pytorch or tensorflow
    epochs: int
    source: str


@dataclass(frozen=True)
class RuleCheck:
    """One rule: whether the answer keeps it, and what was found (and what it would take where it does not)."""

    rule: str
    holds: bool
    said: str


def feed_rules(record: FeedRecord, closed: Closed | None) -> list[RuleCheck]:
    """Each CLOSED rule against a feed record (`closed`: its workload's definition; None for a custom workload)."""
    if closed is None:
        return [RuleCheck("workload", False, f"{record.workload} is not one of MLPerf Storage's workloads")]
    return [_workload(record, closed), _reader(record, closed), _size(record), _steps(record), _runs(record, closed)]


def _workload(record: FeedRecord, closed: Closed) -> RuleCheck:
    """The workload's batch, step and AU as its file has them (a --what-if step is another accelerator's)."""
    same = (record.batch_size, record.compute_s, record.threshold) == (closed.batch_size, closed.compute_s, closed.au)
    said = f"batch {record.batch_size}, step {record.compute_s * 1000:g} ms, AU {record.threshold:.2f}"
    if not same:
        said += f"; {closed.source} has batch {closed.batch_size}, {closed.compute_s * 1000:g} ms, AU {closed.au:.2f}"
    return RuleCheck("workload", same, said)


def _reader(record: FeedRecord, closed: Closed) -> RuleCheck:
    """iobench reads through PyTorch's side; a CLOSED run reads the workload's format with its loader, in DLIO."""
    return RuleCheck(
        "format and loader",
        False,
        f"{record.format} read by {record.loader}; a CLOSED run reads {closed.format} through {closed.data_loader}'s "
        "loader in DLIO (10.1: neither may change)",
    )


def _size(record: FeedRecord) -> RuleCheck:
    """The dataset at least 5x the host's memory, so that the page cache cannot hold it (6.6.2)."""
    dataset, memory = record.samples * record.sample_bytes, record.environment.ram_bytes
    if memory <= 0:
        return RuleCheck("dataset size", False, "the host's memory was not recorded")
    needed, ratio = HOST_MEMORY_MULTIPLIER * memory, dataset / memory
    if dataset >= needed:
        return RuleCheck("dataset size", True, f"{dataset / 1e9:,.1f} GB, {ratio:.1f}x the host's memory")
    how = "read cold each epoch here (--cache cold), as the rule means it" if record.cache == "cold" else "read warm"
    return RuleCheck(
        "dataset size",
        False,
        f"the dataset is {ratio:.2g}x memory ({dataset / 1e9:,.2f} GB), {how}; a CLOSED run needs "
        f"{HOST_MEMORY_MULTIPLIER}x, {needed / 1e9:,.0f} GB (6.6)",
    )


def _steps(record: FeedRecord) -> RuleCheck:
    """At least 500 steps an epoch at the count answered (7)."""
    n = max(1, fed_count(record.point_map(), record.threshold, record.rules))
    needed = MIN_STEPS * record.batch_size * n
    steps = record.samples // (record.batch_size * n)
    if record.samples >= needed:
        return RuleCheck("epoch length", True, f"{steps:,} steps an epoch at {n} accelerator(s)")
    return RuleCheck(
        "epoch length",
        False,
        f"{steps:,} steps an epoch at {n} accelerator(s); a CLOSED run needs {MIN_STEPS} ({needed:,} samples) (7)",
    )


def _runs(record: FeedRecord, closed: Closed) -> RuleCheck:
    """A result is the mean of five runs of the workload's epochs after a warm-up run; feed measures each count once."""
    epochs = max((len(r) for p in record.points for r in p.rank_au), default=0)
    return RuleCheck(
        "runs",
        False,
        f"each count measured once, {epochs} timed epoch(s); a CLOSED result is the mean of {RUNS} runs of "
        f"{closed.epochs} epoch{'s' if closed.epochs != 1 else ''} after a warm-up run (6.6)",
    )


def rules_line(record: FeedRecord, closed: Closed | None) -> str:
    """The rules' verdict in one line, as every answer says it: the rules broken, each with what it would take."""
    return rules_text(feed_rules(record, closed))


def checkpoint_rules(rows: list[LibraryRow]) -> list[RuleCheck]:
    """Each CLOSED checkpointing rule against one state's rows (its libraries and save modes)."""
    measured = [r for r in rows if not r.ceiling]
    state = max((r.state_bytes for r in measured), default=0)
    durable = bool(measured) and all(r.durable_s is not None for r in measured)
    cold = bool(measured) and all(r.cold_s is not None for r in measured)
    rounds = min((len(r.durable_rounds) for r in measured), default=0)
    return [
        RuleCheck(
            "workload",
            False,
            f"a {_size_text(state)} state of generated tensors; a CLOSED run writes one of MLPerf's llama3 "
            f"checkpoints in its parallel layout, every rank its shard ({CHECKPOINT_WORKLOADS}) (2.2.1)",
        ),
        RuleCheck(
            "fsync",
            durable,
            "every save timed until durable (its files fsynced)" if durable else "a save not timed until durable",
        ),
        RuleCheck(
            "cache",
            cold,
            "restores read cold (the page cache emptied after the writes)"
            if cold
            else "restores read warm here; a CLOSED run clears the cache between the writes and the reads (2.2.2)",
        ),
        RuleCheck(
            "checkpoints",
            rounds >= CHECKPOINTS,
            f"{rounds} save(s) and restore(s) a library"
            + ("" if rounds >= CHECKPOINTS else f"; a CLOSED run writes {CHECKPOINTS} and reads {CHECKPOINTS} (2.2.5)"),
        ),
        RuleCheck("runs", False, f"one run; a CLOSED result is the mean of {RUNS} runs (2.2.3)"),
    ]


def _size_text(nbytes: int) -> str:
    return f"{nbytes / 1e9:,.2f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:,.1f} MB"


def checkpoint_rules_line(rows: list[LibraryRow]) -> str:
    """Checkpoint's rules in one line, as its answer says them."""
    return rules_text(checkpoint_rules(rows))


def rules_text(checks: list[RuleCheck]) -> str:
    """The rules' verdict in one line: the rules broken, each with what it would take."""
    broken = [c for c in checks if not c.holds]
    if not broken:
        return "rules: this answer would stand as a CLOSED MLPerf Storage result"
    return "rules: not a CLOSED MLPerf Storage result: " + "; ".join(f"{c.rule}: {c.said}" for c in broken)
