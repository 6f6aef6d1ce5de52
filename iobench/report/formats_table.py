"""The formats side by side: speed, shuffle quality, bytes on disk and write time in one table.

Speed alone rewards the formats that shuffle least (a shard shuffle with a small buffer reads almost in
order) and hides what a format costs to write and store; this table puts the four together, per workload,
each format at its fastest shuffled configuration, warm and cold, and says which is fastest among those
that shuffle as well as a uniform shuffle.
"""

from __future__ import annotations

from iobench.judge.answer import answers, fastest_of
from iobench.judge.shuffle import UNIFORM_SHUFFLE, shuffles
from iobench.measuring.limit_rule import device_resident
from iobench.plan.labels import settings_label
from iobench.report.tables import shuffle_text
from iobench.results.markdown import md_text
from iobench.results.record import RunRecord


def _cell(r: RunRecord | None) -> tuple[str, str]:
    if r is None:
        return "-", "-"
    how = settings_label(r)
    return f"{r.epochs.samples_per_s:,.0f} ({md_text(how)})", shuffle_text(r)


def format_lines(groups: dict[str, list[RunRecord]]) -> list[str]:
    """A table per workload that was read in more than one format, shuffled and from disk; [] otherwise."""
    lines: list[str] = []
    for workload, records in groups.items():
        shuffled = [r for r in records if r.config.shuffled and not device_resident(r)]
        if len({r.config.format for r in shuffled}) < 2:
            continue
        rows = []
        for name in sorted({r.config.label for r in shuffled}):
            mine = [r for r in shuffled if r.config.label == name]
            warm = fastest_of([r for r in mine if r.config.cache != "cold"])
            cold = fastest_of([r for r in mine if r.config.cache == "cold"])
            d = mine[0].dataset
            # records of one format made before the write time was kept have none: any that has it
            write = next((r.dataset.format_write_seconds for r in mine if r.dataset.format_write_seconds), None)
            written = f"{write:.2f} ({d.dataset_bytes / 1e6 / write:,.1f} MB/s)" if write else "-"
            rows.append((warm.epochs.samples_per_s if warm else 0.0, name, warm, cold, d.dataset_bytes, written))
        lines += [
            f"## Formats: speed, shuffle quality, bytes on disk, write time ({md_text(workload)})",
            "",
            "Each format and loader at its fastest shuffled configuration (settings in brackets); shuffle "
            "is spread/order of the order delivered, 1.00/1.00 = a uniform shuffle "
            "(iobench's docs/shuffle-quality.md).",
            "",
            "| format/loader | warm samples/s | shuffle | cold samples/s | shuffle | on disk MB | write s (MB/s) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for _, name, warm, cold, size, written in sorted(rows, key=lambda row: -row[0]):
            lines.append(
                f"| {md_text(name)} | {' | '.join(_cell(warm))} | {' | '.join(_cell(cold))} | "
                f"{size / 1e6:,.1f} | {written} |"
            )
        lines.append("")
        for cache in ("warm", "cold"):
            pool = [r for r in shuffled if (r.config.cache == "cold") == (cache == "cold")]
            best, best_uniform = fastest_of(pool), fastest_of([r for r in pool if shuffles(r)])
            if best is None or best_uniform is None:
                continue
            same = (
                " (also the fastest of all)"
                if best is best_uniform
                else (
                    f"; the fastest of all, {md_text(best.config.label)} at {best.epochs.samples_per_s:,.0f}, "
                    f"shuffles {shuffle_text(best)}"
                )
            )
            refused = any(a.refused for a in answers(pool))  # the judgement chose none: a figure, not a choice
            caveat = "; measured only, not an answer: the answer above says why none is chosen" if refused else ""
            lines.append(
                f"- **Fastest {cache} at a uniform shuffle** (spread and order >= {UNIFORM_SHUFFLE}, within "
                "scoring noise): "
                f"{md_text(best_uniform.config.label)} {md_text(settings_label(best_uniform))}, "
                f"{best_uniform.epochs.samples_per_s:,.0f} samples/s{same}{caveat}"
            )
        lines.append("")
    return lines
