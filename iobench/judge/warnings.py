"""What makes a figure suspect, as typed values made once per run; the console and Markdown only format them. A
finding that repeats across a run's configurations is said once, with how many it concerns (a 500-sample dataset's
batch warning was printed six times, once per configuration)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from iobench.choices import Choice
from iobench.judge.epoch_times import first_run_slow, outliers, two_groups
from iobench.judge.evidence import BUSY_CORES
from iobench.loaders import kind_of
from iobench.plan.labels import settings_label
from iobench.results.limits import ceiling_words
from iobench.results.markdown import md_text
from iobench.results.record import STORED_THREADS_READ, RunRecord
from iobench.results.stats import CV_LIMIT, summary

# Above this share of its ceiling a figure says the ceiling is wrong (5%: the noise of these disks and VMs).
ABOVE_CEILING_PERCENT = 105.0
# Other programs using this many cores beside a run make its torch paths slow (threads wait on each other).
STRAGGLER_LIMIT = 1.2  # slowest rank over fastest, above which the record is flagged


class Kind(Choice):
    SPREAD = "spread"
    OUTLIER = "outlier"
    FIRST_SLOW = "first-slow"
    NOT_COLD = "not-cold"
    STRAGGLER = "straggler"
    PARTIAL = "partial"
    DELIVERY = "delivery"
    LOW_AU = "low-au"
    NOT_DIRECT = "not-direct"
    ABOVE_CEILING = "above-ceiling"
    BUSY = "busy"
    ONE_BATCH = "one-batch"
    RANK_COVERAGE = "rank-coverage"
    RESUME = "resume"


@dataclass(frozen=True)
class RunWarning:
    kind: Kind
    subject: str  # which configuration
    finding: str  # what was seen, with its figures
    advice: str  # what to do about it

    @property
    def severity(self) -> str:
        return "note" if self.kind is Kind.PARTIAL else "warning"

    def console(self) -> str:
        return f"{self.severity}: {self.subject}: {self.finding}; {self.advice}"

    def markdown(self) -> str:
        return f"- **{self.severity}** {md_text(self.subject)}: {md_text(self.finding)}; {md_text(self.advice)}"


def _span(values: list[float]) -> str:
    return f"{values[0]:.3f} s" if len(values) == 1 else f"{values[0]:.3f}-{values[-1]:.3f} s"


def series_warnings(subject: str, seconds: Sequence[float]) -> list[RunWarning]:
    """What is suspect about a series of epoch times."""
    found: list[RunWarning] = []
    if not seconds:
        return found
    s = summary(seconds)
    groups = two_groups(seconds) if s.cv > CV_LIMIT else None
    if groups is not None:
        fast, slow = groups
        found.append(
            RunWarning(
                Kind.SPREAD,
                subject,
                f"the epochs fall into two groups ({_span(fast)} and {_span(slow)}): a fast and a slow regime, as when "
                "other programs take the cores for part of the run; their median stands for neither",
                "measure again with the machine quiet, or pin the benchmark to idle cores",
            )
        )
    elif s.cv > CV_LIMIT:
        found.append(
            RunWarning(
                Kind.SPREAD,
                subject,
                f"epoch times vary by {s.cv:.0%} (CV > {CV_LIMIT:.0%})",
                "use more --runs, close other programs, or pin the benchmark to idle cores",
            )
        )
    out = outliers(seconds)
    if out:
        listed = ", ".join(f"#{i + 1} ({seconds[i]:.3f} s)" for i in out)
        found.append(
            RunWarning(
                Kind.OUTLIER,
                subject,
                f"outlier epoch(s) {listed} against a median of {s.median:.3f} s",
                "something else used the machine: rerun, or raise --runs so the median absorbs it",
            )
        )
    if first_run_slow(seconds):
        found.append(
            RunWarning(
                Kind.FIRST_SLOW,
                subject,
                f"the first epoch ({seconds[0]:.3f} s) is much slower than the rest "
                f"(median {statistics.median(seconds[1:]):.3f} s): a caching effect",
                "use --warmup or --cache",
            )
        )
    return found


def record_warnings(records: Sequence[RunRecord], min_au: float | None = None) -> list[RunWarning]:
    found: list[RunWarning] = []
    for r in records:
        subject = f"{r.describe()} {settings_label(r, measured=False)}"
        found += _run_warnings(subject, r, min_au) + _reading_warnings(subject, r)
        found += series_warnings(subject, r.epochs.epoch_seconds)
        if r.ranks.straggler_ratio > STRAGGLER_LIMIT:
            found.append(
                RunWarning(
                    Kind.STRAGGLER,
                    subject,
                    f"the slowest of {r.config.world_size} ranks took {r.ranks.straggler_ratio:.2f}x as long as the "
                    "fastest (median over epochs)",
                    "every rank waits for it: see rank_epoch_seconds in the record",
                )
            )
        found += delivery_warnings(subject, r) + coverage_warnings(subject, r) + resume_warnings(subject, r)
    return found


def _run_warnings(subject: str, r: RunRecord, min_au: float | None) -> list[RunWarning]:
    """What the run's circumstances say of its figures: a step that waited, other programs on the cores, one batch."""
    found = []
    au = r.epochs.accelerator_utilisation
    if min_au is not None and au is not None and au < min_au:
        found.append(
            RunWarning(
                Kind.LOW_AU,
                subject,
                f"accelerator utilisation {au:.0%} is below --min-au {min_au:.0%} with step {r.config.step}",
                "the accelerator waits for data: more workers, a faster format, or a larger batch",
            )
        )
    busy = r.host.busy
    if busy is not None and busy > BUSY_CORES and r.config.world_size == 1:
        found.append(
            RunWarning(
                Kind.BUSY,
                subject,
                f"other programs used {busy:.1f} cores around the run{_load_average(r)} on "
                f"{r.environment.cpu_count or '?'} cores: torch's threaded paths slow down sharply when they "
                "share cores (up to 9.5x), numpy's single thread hardly",
                IN_TURN_BUSY
                if r.waits.turn_session
                else "close other programs and measure again, or measure it on purpose with --cpu-contention N "
                "and --torch-threads 1",
            )
        )
    if r.config.settings.batch_size > r.dataset.n_samples:
        found.append(
            RunWarning(
                Kind.ONE_BATCH,
                subject,
                f"batch size {r.config.settings.batch_size:,} is larger than the dataset "
                f"({r.dataset.n_samples:,} samples): "
                "every epoch was one batch, so the figures say little about a loader's steady state",
                "give a --batch-size well below the dataset size, or a larger dataset",
            )
        )
    return found


def _load_average(r: RunRecord) -> str:
    """` (load average 2.1 before, 2.3 after)`, where the record has them."""
    h = r.host
    if h.load_before is None or h.load_after is None:
        return ""
    return f" (load average {h.load_before:.1f} before, {h.load_after:.1f} after)"


def _reading_warnings(subject: str, r: RunRecord) -> list[RunWarning]:
    """What the reads say of the figures: above their ceiling, a cold epoch that was not, no O_DIRECT."""
    found = []
    share = r.limit.percent_of_limit
    if share is not None and share > ABOVE_CEILING_PERCENT:
        found.append(
            RunWarning(
                Kind.ABOVE_CEILING,
                subject,
                f"{share:.0f}% of its ceiling, {ceiling_words(r.limit.limit_name)} "
                f"({r.limit.limit_mb_per_s:,.0f} MB/s): a ceiling "
                "a loader beats was measured by a slower method than the loader's",
                "measure the ceilings again with this iobench (`iobench limits`); if it persists, report it",
            )
        )
    if r.system.cold_not_cold:
        found.append(
            RunWarning(
                Kind.NOT_COLD,
                subject,
                f"a cold epoch started with {max(r.system.residency_before):.0%} of the dataset cached (> 5%)",
                "the data is on tmpfs, whose files are memory and cannot be made cold"
                if r.environment.data_filesystem in ("tmpfs", "ramfs")
                else "something still maps the files, or eviction is not permitted (run as root)",
            )
        )
    kind = kind_of(r.config.loader)
    if kind is not None and kind.cold_direct and r.config.cold and r.system.read_method == STORED_THREADS_READ:
        found.append(
            RunWarning(
                Kind.NOT_DIRECT,
                subject,
                f"cold epochs were read by {STORED_THREADS_READ}: this file system refuses O_DIRECT "
                "or the kernel has no Linux AIO",
                "not the storage reference: put the dataset on a disk file system (ext4, xfs)",
            )
        )
    return found


def resume_warnings(subject: str, r: RunRecord) -> list[RunWarning]:
    """--resume-check: a restored pipeline that lost or repeated samples, or could not resume; no state at all is
    a note in the record (resume_supported), not a warning."""
    e = r.epochs
    if e.resume_error:
        return [
            RunWarning(
                Kind.RESUME,
                subject,
                f"resuming mid-epoch failed: {e.resume_error}",
                "a preempted job with this pipeline cannot continue its epoch",
            )
        ]
    if e.resume_lost_samples or e.resume_repeated_samples:
        return [
            RunWarning(
                Kind.RESUME,
                subject,
                f"resumed twice mid-epoch, it lost {e.resume_lost_samples:,} samples "
                f"and repeated {e.resume_repeated_samples:,}",
                "a preempted job trains on another epoch than the one it started",
            )
        ]
    return []


def coverage_warnings(subject: str, r: RunRecord) -> list[RunWarning]:
    """Ranks that got unequal numbers of batches (DistributedDataParallel then hangs at the last all-reduce), and
    samples that reached two ranks or none."""
    k = r.ranks
    found = []
    if len(set(k.rank_batches)) > 1:
        found.append(
            RunWarning(
                Kind.RANK_COVERAGE,
                subject,
                f"the ranks got {'/'.join(map(str, k.rank_batches))} batches in an epoch",
                "DDP hangs at the last all-reduce of a rank with fewer: "
                "even the shares (drop_last, or the library's own equalising)",
            )
        )
    if k.duplicated_samples or k.missing_samples:
        found.append(
            RunWarning(
                Kind.RANK_COVERAGE,
                subject,
                f"across the ranks {k.duplicated_samples:,} samples "
                f"arrived more than once and {k.missing_samples:,} never",
                "see rank_samples in the record: the shards cover the dataset unevenly",
            )
        )
    return found


def delivery_warnings(subject: str, r: RunRecord) -> list[RunWarning]:
    """An epoch cut by --max-batches/--max-seconds is a note; a pipeline that read fewer or more samples
    than the dataset holds on its own (a library dropping the last samples, or repeating some to even
    out ranks) is a warning: its samples/s counts what it delivered, not the dataset."""
    delivered, held = r.epochs.samples_per_epoch, r.dataset.n_samples
    cut = r.config.max_batches is not None or r.config.max_seconds is not None
    if delivered != held and not cut:
        what = "dropped" if delivered < held else "repeated"
        finding = (
            f"the pipeline delivered {delivered:,} samples per epoch of the {held:,} the dataset holds "
            f"({abs(held - delivered):,} {what} by the library)"
        )
        advice = "samples/s counts what was delivered; docs/formats.md says why this format does so"
        return [RunWarning(Kind.DELIVERY, subject, finding, advice)]
    if r.epochs.partial:
        stopped = "epochs stopped early (--max-batches/--max-seconds)"
        return [RunWarning(Kind.PARTIAL, subject, stopped, "a partial read")]
    return []


# Kinds that, seen for several configurations of one run, say one thing about the machine: one line for them all.
SUMMARISED = (Kind.BUSY, Kind.SPREAD, Kind.OUTLIER)


def summarised(found: list[RunWarning], configurations: int) -> list[RunWarning]:
    """The warnings with each kind in SUMMARISED said once when it concerns several configurations (a run of 12
    configurations on a shared machine printed 7-12 long contention warnings and still ranked them), and any other
    finding said in the same words for several configurations said once, with their count."""
    kept: list[RunWarning] = []
    grouped: dict[Kind, list[RunWarning]] = {}
    same: dict[tuple[Kind, str, str], list[RunWarning]] = {}
    for w in found:
        if w.kind in SUMMARISED:
            grouped.setdefault(w.kind, []).append(w)
        else:
            same.setdefault((w.kind, w.finding, w.advice), []).append(w)
    for (kind, finding, advice), ws in same.items():
        subject = ws[0].subject if len(ws) == 1 else f"{len(ws)} of {configurations} configurations"
        kept.append(RunWarning(kind, subject, finding, advice))
    for kind, ws in grouped.items():
        if len(ws) == 1:
            kept.append(ws[0])
            continue
        worst = max(ws, key=lambda w: _first_number(w.finding))
        subject = f"{len(ws)} of {configurations} configurations"
        kept.append(
            RunWarning(
                kind,
                subject,
                f"{_SUMMARY[kind]}; the worst, {worst.subject}: {worst.finding}",
                worst.advice
                if worst.advice == IN_TURN_BUSY
                else f"their figures and their order are not settled: {worst.advice}",
            )
        )
    return kept


# beside other programs, runs taken in turn: the figures are the shared machine's, the order is the answer's to decide
IN_TURN_BUSY = (
    "these figures are the shared machine's, not a quiet one's; their order is decided in pairs of runs taken in turn "
    "(the answer says whether it holds); close other programs for quiet figures"
)
_SUMMARY = {
    Kind.BUSY: "other programs used the cores during the run",
    Kind.SPREAD: "epoch times spread more than 10%",
    Kind.OUTLIER: "outlier epochs",
}


def _first_number(text: str) -> float:
    import re

    found = re.search(r"[0-9]+(?:\.[0-9]+)?", text)
    return float(found.group()) if found else 0.0
