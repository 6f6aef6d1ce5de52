"""The run's answer line: what it recommends, how sure, what it suggests to run next, and what it says when the
machine was shared."""

from __future__ import annotations

import shlex

from iobench.report.answer import console_answer, tune_command
from iobench.results.record import RunRecord
from tests.conftest import FLAT_RECORD


def record(rate_seconds: list[float], busy: float = 0.0, **config) -> RunRecord:
    return RunRecord.from_json(
        {
            **FLAT_RECORD,
            "epoch_seconds": rate_seconds,
            "epoch_seconds_median": sorted(rate_seconds)[1],
            "epoch_seconds_min": min(rate_seconds),
            "epoch_seconds_max": max(rate_seconds),
            "samples_per_s": FLAT_RECORD["samples_per_epoch"] / sorted(rate_seconds)[1],
            "other_cpu_before": busy,
            "other_cpu_after": busy,
            **config,
        }
    )


def test_a_ranking_taken_beside_other_programs_is_no_answer_and_says_so():
    """The first run on a loaded machine said '16.68x the next (their intervals apart)', and nothing of the load; then
    it said so but still promoted npy/preload at 82-620 samples/s (4,374 with one torch thread): no "use" there."""
    fast, slow = record([0.1, 0.11, 0.1], busy=1.6, loader="tensorclass"), record([1.0, 1.1, 1.0], busy=1.5)
    line = console_answer([fast, slow])
    assert "other programs used 1.5-1.6 cores beside the runs" in line and "use " not in line, line
    assert "answer (warm shuffle on cpu): none" in line and "npy/tensorclass" in line
    quiet = console_answer([record([0.1, 0.11, 0.1], loader="tensorclass"), record([1.0, 1.1, 1.0])])
    assert "other programs" not in quiet and "use npy/tensorclass" in quiet


def test_overlapping_intervals_are_not_settled_and_no_ratio_is_printed_as_if_settled():
    """ "tied with memmap/tensorclass (18.76x, ...)" read as a contradiction: the ratio is said unsettled, with the
    interval that makes it so."""
    best, wide = record([0.1, 0.1, 0.1]), record([0.1, 2.0, 0.3], loader="tensorclass")
    line = console_answer([best, wide])
    assert "tied" not in line and "not settled against npy/tensorclass" in line and "interval spans" in line, line


def test_the_suggested_tune_is_a_command_that_names_the_data_it_measured():
    """`run --dataset-factory` suggested `iobench tune --format factory` (a KeyError): a user's pipeline is tuned by its
    factory, a prepared format with the folder and dataset the run was given, and the step and order it ran."""
    factory = record([0.1, 0.1, 0.1], format="factory", dataset="mypipe:make", step="mypipe:step")
    assert tune_command(factory) == "iobench tune --dataset-factory mypipe:make --step mypipe:step"
    own = record([0.1, 0.1, 0.1], step="sleep:2", order="sequential")
    command = tune_command(own, ["--data-dir", "my data", "--dataset", "n1"])
    assert shlex.split(command) == [
        "iobench",
        "tune",
        "--format",
        "npy",
        "--data-dir",
        "my data",
        "--dataset",
        "n1",
        "--step",
        "sleep:2",
        "--no-shuffle",
    ]


def test_a_cpu_run_shows_no_copy_to_a_device():
    """A CPU-only run showed 12-25 ms a batch of "host-to-device": there is no copy there, only the loader's
    hand-over (`.to("cpu")` returns the same tensor)."""
    from rich.console import Console

    from iobench.report.answer import bounding_stage
    from iobench.report.tables import split_table

    cpu = record([0.1, 0.1, 0.1], device="cpu", h2d_ms_per_batch=20.0, wait_ms_per_batch=1.0, step_ms_per_batch=1.0)
    console = Console(width=200, record=True)
    console.print(split_table([cpu]))
    text = console.export_text()
    assert "hand-over" in text and "h2d" not in text and "host-to-device" not in text
    assert "host-to-device" not in bounding_stage(cpu) and "hand-over" in bounding_stage(cpu)
    cuda = record([0.1, 0.1, 0.1], device="cuda:0", h2d_ms_per_batch=20.0)
    assert "host-to-device" in bounding_stage(cuda)


def test_when_a_loader_that_holds_the_dataset_wins_the_answer_says_so_not_tune():
    """tune does not search preload: suggesting it for a preload winner sent the user to search other loaders; the
    answer says what the winner costs (the dataset in memory) instead."""
    line = console_answer([record([0.1, 0.1, 0.1], loader="preload"), record([1.0, 1.1, 1.0])])
    assert "use npy/preload" in line and "holds the whole dataset in memory" in line and "iobench tune" not in line
    other = console_answer([record([0.1, 0.1, 0.1]), record([1.0, 1.1, 1.0], loader="preload")])
    assert "iobench tune" in other
