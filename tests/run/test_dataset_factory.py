"""`run --dataset-factory module:function`: a user's own Dataset (or DataLoader) timed by `iobench run`."""

from __future__ import annotations

import itertools
import re
import sys
import textwrap

import pytest

from tests.conftest import assert_formatted, assert_one_line_error, invoke, run_pasted, stored_records

USER_MODULE = '''
import sys

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

SEEN = []


class Rows(Dataset):
    """A user's dataset: nothing of iobench in it."""

    def __len__(self):
        return 300

    def __getitem__(self, i):
        SEEN.append(i)
        return torch.full((4, 8), float(i)), i % 10


class BatchRows(Rows):
    def __getitems__(self, indices):
        return [self[i] for i in indices]


class Stream(IterableDataset):
    def __iter__(self):
        return iter([(torch.zeros(3), 0)] * 50)


def make():
    return Rows()


def make_batched():
    return BatchRows()


def make_loader():
    return DataLoader(Rows(), batch_size=32, shuffle=False)


def make_stream():
    return Stream()


def make_list():
    return [1, 2, 3]


def broken():
    raise RuntimeError("the bucket is gone")


class Breaks(Rows):
    def __getitem__(self, i):
        if i == 299:
            raise ValueError("sample 299 is corrupt")
        return super().__getitem__(i)


def make_breaking():
    return Breaks()


class BrokenFirst(Rows):
    def __getitem__(self, i):
        raise OSError("permission denied: /data/0.jpg")


def make_broken_first():
    return BrokenFirst()


class Quits(Rows):
    def __getitem__(self, i):
        if i == 150:
            sys.exit(3)
        return super().__getitem__(i)


def make_quitting():
    return Quits()


def quits():
    sys.exit(0)


class NegativeLength(Rows):
    def __len__(self):
        return -1


def make_negative_length():
    return NegativeLength()
'''

_names = itertools.count()


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A user module (a fresh name per test) in the working directory, as `--dataset-factory` finds it."""
    name = f"user_pipeline_{next(_names)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_MODULE))
    (tmp_path / "failing_at_import.py").write_text("raise RuntimeError('no GPU driver')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_factory puts the working directory first
    yield name
    sys.modules.pop(name, None)
    sys.modules.pop("failing_at_import", None)


def run_factory(cli, tmp_path, factory: str, *args: str):
    return cli(
        "run",
        "--dataset-factory",
        factory,
        "--results",
        tmp_path / "r.jsonl",
        "-q",
        "--runs",
        "1",
        "--epochs",
        "2",
        *args,
    )


def test_a_users_dataset_is_timed_with_the_settings_given_and_recorded(cli, tmp_path, user):
    result = run_factory(cli, tmp_path, f"{user}:make", "--batch-size", "64", "--step", "sleep:1")
    assert result.code == 0, result.err
    [record] = stored_records(tmp_path / "r.jsonl")
    assert record["format"] == "factory" and record["dataset"] == f"{user}:make" and record["source"] == f"{user}:make"
    assert record["samples_per_epoch"] == 300 and record["batches_per_epoch"] == 5, "every sample once per epoch"
    assert record["n_samples"] == 300 and record["sample_shape"] == [4, 8] and record["dtype"] == "float32"
    assert record["sample_bytes"] == 128 and record["dataset_bytes"] == 300 * 128
    assert record["batch_size"] == 64 and record["fetch"] == "item", "a Dataset without __getitems__: per sample"
    assert record["step_ms_per_batch"] > 0.5 and record["accelerator_utilisation"] is not None
    assert len(record["epoch_seconds"]) == 2 and record["shuffle"] is True
    assert f"{user}:make" in result.out and "1 record(s) appended" in result.out
    assert "spread/order" not in result.out, "no shuffle footnote for a record without a shuffle score"
    invoke("report", tmp_path / "r.jsonl", "--out", tmp_path / "report")
    assert f"from {user}:make" in (tmp_path / "report" / "report.md").read_text()


def test_workers_and_a_batch_fetching_dataset(cli, tmp_path, user):
    result = run_factory(
        cli, tmp_path, f"{user}:make_batched", "--num-workers", "2", "--prefetch-factor", "3", "--no-shuffle"
    )
    assert result.code == 0, result.err
    [record] = stored_records(tmp_path / "r.jsonl")
    assert (record["num_workers"], record["prefetch_factor"], record["fetch"]) == (2, 3, "batch")
    assert record["order"] == "sequential" and record["samples_per_epoch"] == 300


def test_a_users_dataloader_is_timed_as_built_and_its_settings_recorded(cli, tmp_path, user):
    result = run_factory(cli, tmp_path, f"{user}:make_loader")
    assert result.code == 0, result.err
    [record] = stored_records(tmp_path / "r.jsonl")
    assert (record["batch_size"], record["num_workers"], record["order"]) == (32, 0, "sequential")
    assert record["samples_per_epoch"] == 300 and record["batches_per_epoch"] == 10
    refused = run_factory(cli, tmp_path, f"{user}:make_loader", "--num-workers", "2")
    assert_one_line_error(refused, "returns a DataLoader", "--num-workers")


def test_an_iterable_dataset_orders_itself(cli, tmp_path, user):
    assert_one_line_error(run_factory(cli, tmp_path, f"{user}:make_stream"), "IterableDataset", "--no-shuffle")
    result = run_factory(cli, tmp_path, f"{user}:make_stream", "--no-shuffle", "--batch-size", "10")
    assert result.code == 0, result.err
    [record] = stored_records(tmp_path / "r.jsonl")
    assert record["samples_per_epoch"] == 50 and record["n_samples"] == 50, "counted from the epochs"


@pytest.mark.parametrize(
    ("factory", "args", "fragments"),
    [
        ("{user}", [], ["module:function"]),
        ("no_such_module_here:make", [], ["cannot import no_such_module_here"]),
        ("failing_at_import:make", [], ["importing failing_at_import failed", "RuntimeError: no GPU driver"]),
        ("{user}:missing", [], ["has no function missing"]),
        ("{user}:broken", [], ["broken() failed", "the bucket is gone"]),
        ("{user}:make_list", [], ["returned list", "Dataset or DataLoader"]),
        ("{user}:make_broken_first", [], ["its first sample failed", "OSError: permission denied"]),
        ("{user}:make_negative_length", [], ["__len__ failed", "should return >= 0"]),  # N13: a traceback
        ("{user}:make", ["--torch-threads", "100000"], ["--torch-threads 100000 is far above"]),  # N11
        ("{user}:make", ["--format", "npy"], ["--format", "does not apply"]),
        ("{user}:make", ["--cache-budget", "20%"], ["--cache-budget"]),
        ("{user}:make", ["--cache", "cold"], ["cannot evict", "iobench.measure"]),
        ("{user}:make", ["--prefetch-factor", "2"], ["--prefetch-factor needs --num-workers > 0"]),
        ("{user}:make", ["--cache", "warm", "--warmup", "0"], ["--warmup >= 1"]),
        ("{user}:make", ["--step", "nap"], ["step"]),
    ],
)
def test_mistakes_are_one_line_and_nothing_is_recorded(cli, tmp_path, user, factory, args, fragments):
    result = run_factory(cli, tmp_path, factory.format(user=user), *args)
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize(
    ("factory", "said"),
    [
        ("quits", "{user}:quits() called sys.exit(0)"),
        ("make_quitting", "{user}:make_quitting called sys.exit(3) during epoch 0"),
    ],
)
def test_a_pipeline_that_calls_sys_exit_is_a_failure_in_one_line(cli, tmp_path, user, factory, said):
    """sys.exit(0) in a factory or its dataset ended the run with rc 0, saying nothing and recording nothing."""
    result = run_factory(cli, tmp_path, f"{user}:{factory}")
    assert result.code in (1, 2) and "Traceback" not in result.err, result.err
    [line] = [line for line in result.err.splitlines() if line.strip()]
    assert line == f"iobench: error: {said.format(user=user)}"


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_pipeline_that_fails_mid_epoch_is_named_in_one_line(cli, tmp_path, user, workers):
    result = run_factory(cli, tmp_path, f"{user}:make_breaking", "--num-workers", workers)
    assert result.code == 1 and "Traceback" not in result.err
    [line] = [line for line in result.err.splitlines() if line.strip()]
    assert line == f"iobench: error: {user}:make_breaking failed during epoch 0: ValueError: sample 299 is corrupt"
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.long
def test_tune_searches_a_users_dataset_and_its_script_reproduces_the_delivery(cli, tmp_path, user):
    results = tmp_path / "t.jsonl"
    r = cli(
        "tune",
        "--dataset-factory",
        f"{user}:make",
        "--budget-minutes",
        "60",
        "--rounds",
        "2",
        "--batch-size",
        "64",
        "--results",
        results,
        "-q",
    )
    assert r.code == 0, r.err
    records = stored_records(results)
    assert records and {x["format"] for x in records} == {"factory"}
    assert {x["samples_per_epoch"] for x in records} == {300} and {x["batch_size"] for x in records} == {64}
    assert len({(x["num_workers"], x["prefetch_factor"], x["persistent_workers"], x["in_order"]) for x in records}) > 1
    script = tmp_path / "t-best.py"
    assert f"from {user} import make" in script.read_text() and "lambda" not in script.read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_pasted(script.rename(elsewhere / "best.py"), "spawn")
    assert done.returncode == 0, done.stderr
    assert re.findall(r"epoch \d: (\d+) samples", done.stdout) == ["300"] * 3, done.stdout


@pytest.mark.long
def test_the_factory_script_with_workers_runs_under_spawn_and_forkserver(tmp_path, user):
    from iobench.plan.paste import factory_script
    from iobench.run.dataset_factory import FactoryRequest
    from iobench.settings import LoaderSettings

    settings = LoaderSettings(batch_size=64, num_workers=2, prefetch_factor=4, persistent_workers=True, in_order=False)
    text = factory_script(FactoryRequest(factory=f"{user}:make", settings=settings), "1 samples/s", tmp_path, "cpu")
    for arg in ("num_workers=2", "prefetch_factor=4", "persistent_workers=True", "in_order=False", "batch_size=64"):
        assert arg in text
    (tmp_path / "best.py").write_text(text)
    assert_formatted(tmp_path / "best.py")
    for method in ("spawn", "forkserver"):
        done = run_pasted(tmp_path / "best.py", method)
        assert done.returncode == 0, done.stderr
        assert re.findall(r"epoch \d: (\d+) samples", done.stdout) == ["300"] * 3, done.stdout


@pytest.mark.long
@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--format", "npy", "--dataset-factory", "{user}:make"], ["--format FORMAT, or --dataset-factory"]),
        ([], ["--format FORMAT, or --dataset-factory"]),
        (["--dataset-factory", "{user}:make", "--transform", "augment"], ["--transform does not apply"]),
        (["--dataset-factory", "{user}:make_loader"], ["returns a DataLoader", "needs the Dataset"]),
    ],
)
def test_tune_refusals(cli, tmp_path, user, args, fragments):
    result = cli("tune", *[a.format(user=user) for a in args], "--results", tmp_path / "t.jsonl", "-q")
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.long
def test_wide_shows_a_users_pipelines_split(cli, tmp_path, user):
    """--wide (the per-batch split the README points to) was refused with --dataset-factory: the user needed it."""
    result = run_factory(cli, tmp_path, f"{user}:make", "--wide", "--step", "sleep:1")
    assert result.code == 0, result.err
    assert "per batch (ms): waiting for the loader" in result.out and "hand-over" in result.out
