"""The run options' contract: each declaration is a command's option, a RunConfig field checked as declared, a
record field, and a label where it declares one; a run option added to the registry needs nothing else to reach
the command line and RunConfig."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields

import pytest
from typer.testing import CliRunner

from iobench.cli import app
from iobench.errors import IobenchError
from iobench.plan.config import RunConfig
from iobench.plan.run_options import (
    CHECKPOINT,
    RUN,
    RUN_OPTIONS,
    SWEEP,
    TUNE,
    option_labels,
    recorded_options,
    taken_by,
)
from iobench.results.record import RecordedConfig
from tests.conftest import ROOT

OPTIONS = list(RUN_OPTIONS.values())


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_each_run_option_is_a_field_of_the_config_and_of_the_record(option):
    assert option.name in {f.name for f in fields(RunConfig)}
    assert option.record_field in {f.name for f in fields(RecordedConfig)}
    default = RunConfig(format="npy")
    assert getattr(default, option.name) == option.value(option.default)  # the field's default is the option's


@pytest.mark.parametrize("command", [RUN, SWEEP, TUNE, CHECKPOINT])
def test_each_command_offers_the_run_options_it_takes_and_no_other(command):
    shown = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
    for option in OPTIONS:
        assert (option.option in shown) == (command in option.commands or option.name == "cache"), (command, option)


@pytest.mark.parametrize(
    ("name", "bad", "says"),
    [
        ("cache", "tepid", "--cache"),
        ("eviction", "nope", "--eviction"),
        ("transform", "blur", "transform"),
        ("transform_on", "gpu", "--transform-on"),
        ("torch_threads", 0, "--torch-threads"),
        ("cpu_contention", -1, "--cpu-contention"),
        ("sampler_tail", "cut", "--distributed-sampler"),
        ("cache_budget", "lots", "budget"),
        ("read_limit_mb_per_s", -5.0, "read"),
    ],
)
def test_a_wrong_value_is_refused_by_its_declaration_in_one_line(name, bad, says):
    with pytest.raises(IobenchError, match=says):
        RunConfig(format="npy", **{name: bad})


def test_the_record_stores_each_option_as_declared():
    c = RunConfig(
        format="npy",
        cache="cold",
        cache_budget="20%",
        transform="none",
        transform_on="device",
        torch_threads=2,
        sampler_tail="pad",
    )
    stored = recorded_options({o.name: getattr(c, o.name) for o in OPTIONS})
    assert stored["cache"] == "cold" and stored["cache_budget"] == "20%" and stored["sampler_tail"] == "pad"
    assert stored["transform_on"] is None  # where a transform ran: none ran
    assert stored["torch_threads_asked"] == 2 and "torch_threads" not in stored
    assert recorded_options({})["cache"] == "warm"  # a measurement without the option: its default


def test_labels_come_from_the_declarations():
    record = RecordedConfig(
        dataset="d",
        format="npy",
        loader="dataloader",
        order="shuffle",
        shuffle=True,
        epochs=1,
        warmup=1,
        runs=1,
        device="cpu",
        cache="warm",
        torch_threads_asked=1,
        cpu_contention=2,
        backend="gloo",
        sampler_tail="pad",
    )
    assert option_labels(record) == ["rivals=2", "sampler=pad"]  # under torchrun the threads are shown as had


def test_a_new_run_option_is_its_declaration():
    """A trial option added to the registry alone is an option of the commands that take it and a RunConfig field
    checked by its declaration (its record field and the code that honours it are the rest of the change)."""
    code = """
import sys
from iobench.plan import run_options as ro
ro.RUN_OPTIONS["trial_knob"] = ro.RunOption("trial_knob", int, 3, "A trial.", frozenset({ro.RUN}),
                                            value=lambda v: v if v >= 0 else sys.exit("--trial-knob must be >= 0"))
from iobench.plan.config import RunConfig
from iobench.cli import app
from typer.testing import CliRunner
assert RunConfig(format="npy").trial_knob == 3 and RunConfig(format="npy", trial_knob=5).trial_knob == 5
print("--trial-knob" in CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output)
print("--trial-knob" in CliRunner().invoke(app, ["sweep", "--help"], env={"COLUMNS": "200"}).output)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.stdout.split() == ["True", "False"], done.stderr[-2000:]


def test_commands_take_options_in_their_declared_order():
    assert [o.name for o in taken_by(RUN)][:3] == ["cache", "eviction", "read_limit_mb_per_s"]
    assert "cache" not in [o.name for o in taken_by(SWEEP)]  # sweep takes a comma list of caches


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_each_run_option_declares_its_label(option):
    """3 of 10 options carried a label; cache, budget, read limit and transform were labelled by hand in report/,
    twice, in other words."""
    from iobench.plan.run_options import CACHE_LABEL, SETTINGS_LABEL, TRANSFORM_LABEL, _none

    assert option.label is not _none and option.shown in (SETTINGS_LABEL, CACHE_LABEL, TRANSFORM_LABEL)


def test_the_tables_and_the_report_say_the_options_as_declared():
    from iobench.plan.labels import settings_label
    from iobench.report.report import workload_of_record
    from iobench.report.tables import _residency
    from tests.conftest import record_of

    r = record_of(
        cache="cold",
        cache_budget="20%",
        read_limit_mb_per_s=400.0,
        transform="augment",
        transform_on="device",
        residency_before=[0.0],
    )
    assert _residency(r) == "cold (0%) read<=400MB/s budget=20%"
    assert "augment@device" in settings_label(r)
    assert workload_of_record(r).endswith(
        "reads throttled to 400 MB/s, page cache capped at 20%, augment on the device"
    )
