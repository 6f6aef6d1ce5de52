"""What a reader of report.md and its plots sees: the answer first, sorted rows, one line per finding,
plots whose every bar has its own label."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pytest
from matplotlib.ticker import FixedLocator

from iobench.measuring.limit_rule import with_limits
from iobench.report import plots
from iobench.report.report import write_report
from tests.conftest import FLAT_RECORD, record_of


def _records():
    """A mixed set: batch sizes, workers, both caches and orders, two dataset sizes, a transform."""
    out = []
    for bs in (256, 1024):
        for workers in (0, 2):
            for cache in ("warm", "cold"):
                for shuffle in (True, False):
                    rate = 1000.0 * bs / 256 + 100 * workers + (50 if cache == "warm" else 0) + (7 if shuffle else 0)
                    out.append(
                        record_of(
                            batch_size=bs,
                            num_workers=workers,
                            cache=cache,
                            shuffle=shuffle,
                            order="shuffle" if shuffle else "sequential",
                            samples_per_s=rate,
                            mb_per_s=rate * 56 / 1e6,
                            storage_read_mb_per_s=1.0,
                            page_cache_read_mb_per_s=1.0,
                            memory_gather_mb_per_s=1.0,
                        )
                    )
    out.append(record_of(dataset="n1000_3-4_float32_c1000_s0", n_samples=1000, samples_per_s=777.0))
    out.append(record_of(transform="augment", transform_us_per_sample=760.0, samples_per_s=333.0))
    return out


def _texts(fig) -> list[list[str]]:
    """Per axis: the labels of its categories (ticks placed by the plot, not numbers) and its legend."""
    fig.canvas.draw()
    found = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(axis.get_major_locator(), FixedLocator):
                found.append([t.get_text() for t in axis.get_ticklabels()])
        legend = ax.get_legend()
        if legend is not None:
            found.append([t.get_text() for t in legend.get_texts()])
    return found


@pytest.mark.parametrize("name", list(plots.PLOTS))
def test_every_plot_gives_each_bar_and_line_its_own_label(name):
    """Labels omitted the batch size (a batch change read as a workers change); tune's plots had 98
    identical labels."""
    records = _records()
    more = [record_of(dataset="n1000_3-4_float32_c1000_s0", n_samples=1000, batch_size=256, samples_per_s=900.0)]
    fig = plots.PLOTS[name][1](records + more)
    if fig is None:
        pytest.skip(f"{name}: nothing to plot in this set")
    for words in _texts(fig):
        assert len(words) == len(set(words)), f"{name}: repeated labels {words}"
    plt.close(fig)


def test_the_batch_size_is_in_the_labels_and_measured_costs_are_not():
    a, b = record_of(batch_size=256), record_of(batch_size=1024)
    assert plots.label(a) != plots.label(b) and "bs=256" in plots.label(a)
    assert "µs" not in plots.label(record_of(transform="augment", transform_us_per_sample=760.0))


def test_a_bar_plot_keeps_the_fastest_and_counts_the_rest():
    records = [record_of(batch_size=16 + k, samples_per_s=100.0 + k) for k in range(60)]
    fig = plots.split_figure(records)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) == plots.TOP and labels[0].startswith("npy/dataloader bs=75 ")
    assert f"fastest {plots.TOP} of 60" in fig.axes[0].get_title()
    plt.close(fig)


def test_the_split_is_linear_and_its_legend_sits_beside_the_bars():
    fig = plots.split_figure(_records())
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear"
    assert ax.get_legend().get_bbox_to_anchor().x0 >= ax.bbox.x1 - 1, "the legend is outside the axes"
    plt.close(fig)


def test_percent_of_limit_is_skipped_when_every_run_is_far_below_its_ceiling():
    """Transform-bound runs drew bars of 1% each: a plot with nothing to see."""
    from iobench.results.limits import MachineLimits

    limits = MachineLimits(
        hostname="h",
        data_device="d",
        storage_read_mb_per_s=1000.0,
        page_cache_read_mb_per_s=1000.0,
        memory_gather_mb_per_s=1000.0,
    )
    low = [with_limits(record_of(mb_per_s=10.0), limits)]
    assert low[0].limit.percent_of_limit == pytest.approx(1.0)
    assert plots.limit_figure(low) is None
    high = [with_limits(record_of(mb_per_s=500.0), limits)]
    assert plots.limit_figure(high) is not None


def test_the_heatmap_shows_exact_values_and_what_was_held_fixed():
    """956 and 1,154 samples/s were both annotated '1k'."""
    records = [record_of(num_workers=w, samples_per_s=rate) for w, rate in ((0, 956.0), (2, 1154.0))]
    fig = plots.settings_figure(records)
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"956", "1,154"} <= texts
    assert "batch size 16" in fig._suptitle.get_text() and "warm shuffle" in fig._suptitle.get_text()
    plt.close(fig)


def test_the_report_opens_with_the_answer_sorts_rows_and_collapses_warnings(tmp_path):
    results = tmp_path / "r.jsonl"
    rows = [
        dict(FLAT_RECORD, num_workers=w, samples_per_s=rate, epoch_seconds=[0.1, 0.1, 0.1], partial=True)
        for w, rate in ((0, 500.0), (1, 900.0), (2, 700.0))
    ]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = write_report(results, tmp_path / "out")[0].read_text()
    assert text.index("## Answer") < text.index("## Where these were measured") < text.index("## Results")
    answer = text[text.index("## Answer") : text.index("## Where")]
    # the judgement's answer (the console's words): the three share their epochs' interval, so nothing is settled
    assert "npy/dataloader (bs=16 w=1" in answer and "900 \\[" in answer
    assert "not settled against npy/dataloader (bs=16 w=2" in answer
    assert "bounded by waiting for the loader" in answer
    table = [line for line in text.splitlines() if line.startswith("| n100")]
    assert [" w=1 " in table[0], " w=2 " in table[1], " w=0 " in table[2]] == [True] * 3, table
    partial = [line for line in text.splitlines() if "epochs stopped early" in line]
    assert len(partial) == 1 and partial[0].count("npy/dataloader") == 3, "one line naming all three"


def test_the_formats_table_sets_speed_beside_shuffle_bytes_and_write_time():
    """A shard pipeline that is fastest because it barely shuffles must not be named the fastest at a
    uniform shuffle; each format/loader pair gets its row with its own shuffle, bytes and write time."""
    from iobench.report.formats_table import format_lines
    from iobench.report.report import workload_groups

    common = {"order": "shuffle", "shuffle": True}
    records = [
        record_of(
            format="webdataset",
            loader="native",
            samples_per_s=9000.0,
            shuffle_spread=0.22,
            shuffle_order=0.51,
            dataset_bytes=121_500_000,
            format_write_seconds=12.5,
            **common,
        ),
        record_of(
            format="npy",
            samples_per_s=5000.0,
            shuffle_spread=1.0,
            shuffle_order=0.99,
            dataset_bytes=61_600_000,
            format_write_seconds=0.5,
            **common,
        ),
        record_of(
            format="npy",
            samples_per_s=4000.0,
            cache="cold",
            shuffle_spread=1.0,
            shuffle_order=0.99,
            dataset_bytes=61_600_000,
            format_write_seconds=0.5,
            **common,
        ),
    ]
    text = "\n".join(format_lines(workload_groups(records)))
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert "0.22/0.51" in rows["webdataset/native"] and "121.5" in rows["webdataset/native"]
    assert "12.50 (9.7 MB/s)" in rows["webdataset/native"]
    assert rows["npy/dataloader"].count("1.00/0.99") == 2 and "4,000" in rows["npy/dataloader"]
    warm = next(line for line in text.splitlines() if line.startswith("- **Fastest warm"))
    assert "npy/dataloader" in warm and "5,000" in warm and "webdataset/native at 9,000" in warm
    assert format_lines(workload_groups(records[1:])) == [], "one format: nothing to set side by side"


def test_figures_under_a_budget_or_a_throttle_are_kept_apart_from_the_unconstrained():
    """A format's 20%-budget figure is another question than its figure with all of RAM: neither the answer
    nor the formats table may take the faster of the two as the format's best."""
    from iobench.report.answer import answer_lines
    from iobench.report.report import workload_groups

    free = record_of(samples_per_s=9000.0)
    capped = record_of(samples_per_s=300.0, cache_budget="20%")
    throttled = record_of(samples_per_s=200.0, read_limit_mb_per_s=400.0)
    groups = workload_groups([capped, free, throttled])
    assert [len(g) for g in groups.values()] == [1, 1, 1]
    assert sum("page cache capped at 20%" in name for name in groups) == 1
    assert sum("reads throttled to 400 MB/s" in name for name in groups) == 1
    text = "\n".join(answer_lines(groups))
    assert "300 \\[" in text and "9,000 \\[" in text and "200 \\[" in text


def test_figures_from_object_storage_are_kept_apart_from_local_ones_and_per_profile():
    """A cold epoch from a 30 ms store and one from the local disk answer different questions: the answer names the
    fastest of each, and no formats table ranks a remote figure against a local one."""
    from iobench.report.answer import answer_lines
    from iobench.report.formats_table import format_lines
    from iobench.report.report import workload_groups

    common = {"order": "shuffle", "shuffle": True, "cache": "cold"}
    s3 = {
        "storage": "object",
        "remote_profile": "s3-like",
        "remote_latency_ms": 30.0,
        "remote_connection_mb_per_s": 90.0,
    }
    records = [
        record_of(format="npy", samples_per_s=9000.0, **common),
        record_of(format="memmap", samples_per_s=8000.0, **common),
        record_of(format="npy", samples_per_s=1500.0, **common, **s3),
        record_of(format="lmdb", samples_per_s=3500.0, **common, **{**s3, "storage": "fuse"}),
        record_of(
            format="npy",
            samples_per_s=4500.0,
            **common,
            **{**s3, "remote_profile": "express-like", "remote_latency_ms": 5.0},
        ),
        record_of(format="npy", samples_per_s=2500.0, **common, storage="object", remote_profile="external"),
    ]
    groups = workload_groups(records)
    sizes = {name.partition("B/sample")[2]: len(g) for name, g in groups.items()}
    assert sizes == {
        "": 2,
        ", from object storage (s3-like: 30 ms first byte, 90 MB/s per connection)": 2,
        ", from object storage (express-like: 5 ms first byte, 90 MB/s per connection)": 1,
        ", from object storage (an endpoint as it is)": 1,
    }
    answer = "\n".join(answer_lines(groups))
    assert "9,000 " in answer and "3,500 " in answer and "4,500 " in answer
    tables = "\n".join(format_lines(groups))
    assert tables.count("## Formats") == 2, "local and s3-like each have two formats; express-like one"
    s3_table = tables[tables.index("object storage (s3-like") :]
    assert "lmdb/dataloader" in s3_table and "9,000" not in s3_table


def test_the_throughput_plot_keeps_the_cold_bar_of_every_configuration_it_shows():
    """The plot cut the fastest 25 records, so a configuration's slow cold run fell off beside its warm one
    and read as 'never run cold'."""
    records = []
    for k in range(40):
        for cache, rate in (("warm", 1000.0 + 10 * k), ("cold", 10.0 + k)):
            records.append(record_of(batch_size=16 + k, cache=cache, samples_per_s=rate))
    rows, note = plots.top_configurations(records)
    shown = {r.config.settings.batch_size for r in rows}
    assert len(rows) == 2 * len(shown) and len(rows) <= plots.TOP + 1
    assert {r.config.cache for r in rows if r.config.settings.batch_size == max(shown)} == {"warm", "cold"}
    assert max(shown) == 16 + 39 and "of 40 configurations" in note


def test_the_report_says_what_it_left_out_and_does_not_rank_a_step_against_none(tmp_path):
    """A user's 3 records: the report kept 2 (the CSV too) and said nothing of the third; it labelled bars #1/#2
    without saying which had the step, and ranked the run without the step '3.96x the next' against the same
    pipeline with it."""
    import csv

    results = tmp_path / "r.jsonl"
    base = dict(FLAT_RECORD, format="factory", loader="dataloader", dataset="mypipe:make", epoch_seconds=[0.1] * 3)
    rows = [
        dict(base, step="mypipe:step", samples_per_s=100.0, timestamp="2026-11-26T08:00:00+00:00"),
        dict(base, step="mypipe:step", samples_per_s=120.0, timestamp="2026-11-26T08:05:00+00:00"),
        dict(base, step="none", samples_per_s=400.0, timestamp="2026-11-26T08:10:00+00:00"),
    ]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = write_report(results, tmp_path / "out")[0].read_text()
    assert "Left out: 1 earlier record(s) of a configuration measured again" in text and "08:00:00" in text
    answer = text[text.index("## Answer") : text.index("## Where")]
    assert "x the next" not in answer, answer  # two patterns: with the step and without, each its own line
    with open(tmp_path / "out" / "results.csv") as f:
        found = list(csv.DictReader(f))
    assert len(found) == 3 and sorted(x["superseded"] for x in found) == ["False", "False", "True"]
    names = plots.distinct([plots.label(r) for r in map(_record, rows[1:])], list(map(_record, rows[1:])))
    assert names[0] != names[1] and "step mypipe:step" in names[0] and "step none" in names[1]


def _record(row: dict):
    from iobench.results.record import RunRecord

    return RunRecord.from_json(row)
