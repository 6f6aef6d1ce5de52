"""The opening of a report: the best configuration per workload and access pattern, and why it is bounded.

A reader who opens report.md wants the answer before the tables: which format, loader and settings
delivered most, what held it back (the stage that took the batch time, the ceiling it sits under),
and whether the accelerator would have waited (AU with the step it was measured against).
"""

from __future__ import annotations

from collections.abc import Sequence

from iobench.loaders import kind_of
from iobench.measuring.ceiling_rule import device_resident
from iobench.plan.labels import settings_label
from iobench.report.tables import au_text
from iobench.report.warnings import RunWarning, md_text
from iobench.results.ceilings import ceiling_words
from iobench.results.record import RunRecord


def pattern_of(r: RunRecord) -> str:
    """The access pattern a figure belongs to: only figures of one pattern answer the same question. The step is part
    of it: a run with the user's step and the same pipeline without it are not competing loaders (one was ranked
    '3.96x the next' against the other)."""
    c = r.config
    step = f", step {c.step}" if c.step != "none" else ""
    return f"{c.cache} {c.order} on {c.device}{step}"


def bounding_stage(r: RunRecord) -> str:
    """The stage that took most of each batch's time, with its share."""
    e = r.epochs
    copy = "host-to-device" if r.config.device.startswith("cuda") else "the loader's hand-over (no copy on the CPU)"
    stages = {
        "waiting for the loader": e.wait_ms_per_batch,
        copy: e.h2d_ms_per_batch,
        "the device transform": e.transform_ms_per_batch,
        "the step": e.step_ms_per_batch,
    }
    total = sum(stages.values())
    if total <= 0:
        return "no stage measurable"
    name, ms = max(stages.items(), key=lambda kv: kv[1])
    return f"bounded by {name} ({ms / total:.0%} of the batch time)"


def answer_lines(groups: dict[str, list[RunRecord]]) -> list[str]:
    """One line per workload and access pattern: its fastest configuration and why it is not faster."""
    lines = [
        "## Answer",
        "",
        "The fastest way from storage of each workload and access pattern (samples/s median; the gpu-resident "
        "baseline, data already in device memory, is left out):",
        "",
    ]
    for workload, records in groups.items():
        by_pattern: dict[str, list[RunRecord]] = {}
        for r in records:
            if device_resident(r):
                continue
            by_pattern.setdefault(pattern_of(r), []).append(r)
        for pattern, rs in sorted(by_pattern.items()):
            best = max(rs, key=lambda r: r.epochs.samples_per_s)
            ranked = sorted((r.epochs.samples_per_s for r in rs), reverse=True)
            runner_up = f", {ranked[0] / ranked[1]:.2f}x the next of {len(rs)}" if len(rs) > 1 and ranked[1] else ""
            share = best.limit.percent_of_limit
            ceiling = f", {share:.0f}% of {ceiling_words(best.limit.limit_name)}" if share is not None else ""
            au = f", AU {au_text(best)}" if best.epochs.accelerator_utilisation is not None else ""
            lines.append(
                f"- **{md_text(workload)}, {md_text(pattern)}**: {md_text(best.config.label)} "
                f"{md_text(settings_label(best))}: {best.epochs.samples_per_s:,.0f} samples/s "
                f"({best.epochs.mb_per_s:,.1f} MB/s){runner_up}; {bounding_stage(best)}{md_text(ceiling)}{au}"
            )
    return lines + [""]


def sorted_for_table(records: Sequence[RunRecord]) -> list[RunRecord]:
    """Rows by access pattern, then fastest first: the table reads as a ranking within each pattern."""
    return sorted(records, key=lambda r: (pattern_of(r), -r.epochs.samples_per_s))


def collapsed(warnings: Sequence[RunWarning]) -> list[str]:
    """One Markdown line per finding, naming every configuration it concerns (the same note on twenty
    records was twenty lines)."""
    subjects: dict[tuple, list[str]] = {}
    for w in warnings:
        subjects.setdefault((w.severity, w.kind, w.finding, w.advice), []).append(w.subject)
    lines = []
    for (severity, _kind, finding, advice), names in subjects.items():
        who = "; ".join(md_text(n) for n in dict.fromkeys(names))
        lines.append(f"- **{severity}** {who}: {md_text(finding)}; {md_text(advice)}")
    return lines


FACTORY = "factory"  # the records' format for a user's own pipeline (run --dataset-factory)


def tune_command(best: RunRecord, place: Sequence[str] = ()) -> str:
    """The `iobench tune` that searches the settings of `best`'s data as it was measured, runnable as printed from
    where the run was: a user's pipeline by its factory (`--format factory` ended in a KeyError), a prepared format
    with the options that found its dataset (`place`: --data-dir, --dataset as typed), and the step, order and cache
    the run had."""
    import shlex

    c = best.config
    args = ["iobench", "tune"]
    args += ["--dataset-factory", c.dataset] if c.format == FACTORY else ["--format", c.format, *place]
    args += ["--step", c.step] if c.step != "none" else []
    args += ["--no-shuffle"] if c.order == "sequential" else []
    args += ["--cache", c.cache] if c.cache not in ("warm",) and c.format != FACTORY else []
    return " ".join(shlex.quote(a) for a in args)


def console_answer(records: Sequence[RunRecord], place: Sequence[str] = ()) -> str | None:
    """The run's last line: which configuration to use for the pattern measured most, how far ahead of the next and
    how sure (their intervals), and the `tune` command that would settle its settings (`place`: the options that
    found the dataset, as typed). None without two to rank. A ranking taken while other programs used the cores is
    not an answer: the line says what was fastest there and that it may not hold (a loaded machine promoted
    npy/preload at 82-620 samples/s, 4,374 with one torch thread)."""
    from iobench.report.verdict import interval

    by_pattern: dict[str, list[RunRecord]] = {}
    for r in records:
        if not device_resident(r):
            by_pattern.setdefault(pattern_of(r), []).append(r)
    if not by_pattern:
        return None
    pattern, rs = max(by_pattern.items(), key=lambda kv: len(kv[1]))
    ranked = sorted(rs, key=lambda r: -r.epochs.samples_per_s)
    best = ranked[0]
    ib = interval(best)
    what = f"{best.config.label} ({settings_label(best, measured=False)})"
    if (busy := _busy_cores(rs)) is not None:
        return (f"answer ({pattern}): none: other programs used {busy} cores beside the runs, and a ranking taken "
                f"there may not hold on a quiet machine (fastest measured: {what}, {ib.text()} samples/s); measure "
                "again with the machine quiet, or on purpose with --cpu-contention N --torch-threads 1")  # fmt: skip
    kind = kind_of(best.config.loader)
    tune = f"`{tune_command(best, place)}` searches its settings"
    if kind is not None and kind.holds_dataset:  # read whole, then gathered: what tune's loaders cannot beat
        tune = (f"{best.config.loader} holds the whole dataset in memory (read once inside the first epoch): for a "
                "dataset that fits, with room left for the step")  # fmt: skip
    if len(ranked) == 1:
        return f"answer ({pattern}): {what}, {ib.text()} samples/s; {tune}"
    second = ranked[1]
    i2 = interval(second)
    ahead = best.epochs.samples_per_s / second.epochs.samples_per_s if second.epochs.samples_per_s else float("inf")
    if ib.overlaps(i2):
        verdict = (f"not settled against {second.config.label}: its median is {ahead:.2f}x lower, but its interval "
                   f"spans {i2.low:,.0f}-{i2.high:,.0f}, which overlaps; more --runs or --epochs would tell them "
                   "apart")  # fmt: skip
    else:
        verdict = f"{ahead:.2f}x the next, {second.config.label} (their intervals apart, {ib.coverage:.0%} each)"
    return f"answer ({pattern}): use {what}: {ib.text()} samples/s, {verdict}; {tune}"


def _busy_cores(records: Sequence[RunRecord]) -> str | None:
    """The cores other programs used around the runs, where more than BUSY_CORES (the load warning's rule); None on
    a quiet machine or where it was not measured."""
    from iobench.report.verdict import BUSY_CORES, busy

    loads = [x for x in (busy(r) for r in records) if x is not None]
    if not loads or max(loads) <= BUSY_CORES:
        return None
    return f"{max(loads):.1f}" if max(loads) - min(loads) < 0.1 else f"{min(loads):.1f}-{max(loads):.1f}"
