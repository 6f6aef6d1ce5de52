"""The opening of a report: the best configuration per workload and access pattern, and why it is bounded.

A reader who opens report.md wants the answer before the tables: which format, loader and settings
delivered most, what held it back (the stage that took the batch time, the ceiling it sits under),
and whether the accelerator would have waited (AU with the step it was measured against).
"""

from __future__ import annotations

from collections.abc import Sequence

from iobench.judge.answer import answers, main_answer, pattern_of
from iobench.judge.bounds import largest_stage
from iobench.judge.warnings import RunWarning
from iobench.loaders import kind_of
from iobench.report.tables import au_text
from iobench.results.limits import ceiling_words
from iobench.results.markdown import md_text
from iobench.results.record import RunRecord


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
    largest = largest_stage(stages)
    if largest is None:
        return "no stage measurable"
    return f"bounded by {largest[0]} ({largest[1]:.0%} of the batch time)"


def answer_lines(groups: dict[str, list[RunRecord]]) -> list[str]:
    """One line per workload and access pattern: the judgement's answer (`iobench.judge.answer`, the same the console
    prints), and for an answer, why it is not faster (its bounding stage, its ceiling, its AU)."""
    lines = [
        "## Answer",
        "",
        "The fastest way from storage of each workload and access pattern (samples/s: the median of the runs [its "
        "interval, how sure]; the gpu-resident baseline, data already in device memory, is left out):",
        "",
    ]
    for workload, records in groups.items():
        for answer in answers(records):
            best = answer.fastest
            extra = ""
            if answer.winner is not None:
                share = best.limit.percent_of_limit
                ceiling = f", {share:.0f}% of {ceiling_words(best.limit.limit_name)}" if share is not None else ""
                au = f", AU {au_text(best)}" if best.epochs.accelerator_utilisation is not None else ""
                extra = f"; {best.epochs.mb_per_s:,.1f} MB/s, {bounding_stage(best)}{ceiling}{au}"
            lines.append(
                f"- **{md_text(workload)}, {md_text(answer.pattern)}**: {md_text(answer.verdict())}{md_text(extra)}"
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
    """The run's last line: the judgement's answer for the pattern measured most (`iobench.judge.answer`, the same a
    report prints), and what would settle the winner's settings (`place`: the options that found the dataset, as
    typed). None where nothing is ranked."""
    answer = main_answer(records)
    if answer is None:
        return None
    line = f"answer ({answer.pattern}): {answer.verdict()}"
    best = answer.winner
    if best is None:
        return line
    kind = kind_of(best.config.loader)
    if kind is not None and kind.holds_dataset:  # read whole, then gathered: what tune's loaders cannot beat
        return (
            f"{line}; {best.config.loader} holds the whole dataset in memory (read once inside the first epoch): "
            "for a dataset that fits, with room left for the step"
        )
    return f"{line}; `{tune_command(best, place)}` searches its settings"
