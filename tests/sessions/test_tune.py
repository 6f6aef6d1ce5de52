"""`iobench tune`: the candidates it searches, its statistics, the line it prints, and resuming."""

from __future__ import annotations

import importlib.util
import math
import os
import re
import statistics
from dataclasses import replace

import pytest

from iobench.loaders import LoaderName as L  # noqa: N817
from iobench.plan.config import RunConfig
from iobench.plan.paste import best_script
from iobench.run.tune import Candidate, TuneResult
from iobench.run.tune_candidates import candidates
from tests.conftest import (
    NEEDS_TORCHDATA,
    assert_formatted,
    invoke,
    prepare_with_limits,
    run_config,
    run_pasted,
    stored_records,
)

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

CORES = len(os.sched_getaffinity(0))


def test_the_candidates_cover_workers_up_to_the_cores_and_pinning_only_on_cuda():
    base = RunConfig(format="npy")
    found = candidates(base, "npy", cuda=False, batch_sizes=None, loaders=(L.DATALOADER,))
    assert sorted({c.settings.num_workers for c in found}) == list(range(CORES + 1))
    assert not any(c.settings.pin_memory for c in found)
    assert all(
        c.settings.prefetch_factor is None and not c.settings.persistent_workers
        for c in found
        if c.settings.num_workers == 0
    )
    assert {c.settings.in_order for c in found if c.settings.num_workers} == {True, False}
    on_cuda = candidates(base, "memmap", cuda=True, batch_sizes=[256, 1024], loaders=(L.DATALOADER, L.TENSORCLASS))
    # per batch size and pinning: the DataLoader's 8 per worker count, tensorclass's 4 (no in_order), each with
    # torch's threads and with one thread (on a machine with more than one core): threads x workers
    threads = 2 if CORES > 1 else 1
    assert len(found) == threads * (1 + 8 * CORES)
    assert len(on_cuda) == 2 * 2 * threads * ((1 + 8 * CORES) + (1 + 4 * CORES))
    if CORES > 1:  # torch's 2 threads fought 2 decode workers for 2 cores: 1 thread with 2 workers was the answer
        assert {(c.torch_threads, c.settings.num_workers) for c in found} == {
            (t, w) for t in (None, 1) for w in range(CORES + 1)
        }
    assert {c.settings.batch_size for c in on_cuda} == {256, 1024}
    assert {c.loader.value for c in on_cuda} == {"dataloader", "tensorclass"}


@NEEDS_TORCHDATA
def test_a_format_not_fork_safe_is_searched_without_forked_workers_and_with_threads():
    """Lance refuses forked workers (the DataLoader's, its own pipeline's): tune tries them without workers and
    through nodes' threads, and ends instead of stopping at the first refusal."""
    base = RunConfig(format="lance")
    found = candidates(
        base,
        "lance",
        cuda=False,
        batch_sizes=None,
        loaders=(L.NODES, L.NATIVE, L.DATALOADER),
    )
    forked = {c.settings.num_workers for c in found if c.loader.value in ("dataloader", "native")}
    assert forked == {0}
    assert sorted({c.settings.num_workers for c in found if c.loader.value == "nodes"}) == list(range(1, CORES + 1))
    assert {c.loader.value for c in found} == {"dataloader", "native", "nodes"}


@NEEDS_TORCHDATA
def test_threads_are_searched_against_processes_when_torchdata_is_there():
    base = RunConfig(format="npy")
    plain = candidates(base, "npy", cuda=False, batch_sizes=None, loaders=(L.DATALOADER,))
    both = candidates(base, "npy", cuda=False, batch_sizes=None, loaders=(L.NODES, L.DATALOADER))
    nodes = [c for c in both if c.loader.value == "nodes"]
    assert len(both) == len(plain) + len(nodes) and len(nodes) == 4 * CORES  # prefetch 2/4, in order or not
    assert sorted({c.settings.num_workers for c in nodes}) == list(range(1, CORES + 1))
    assert not any(c.settings.persistent_workers for c in nodes)


def test_within_noise_needs_an_interval_that_overlaps():
    best = Candidate(run_config("npy", "dataloader"), rates=[100.0, 101.0, 99.0])
    close = Candidate(run_config("npy", "dataloader", num_workers=1), rates=[99.0, 100.5, 98.0])
    far = Candidate(run_config("npy", "dataloader", num_workers=2), rates=[50.0, 51.0, 49.0])
    once = Candidate(run_config("npy", "dataloader", num_workers=2, persistent_workers=True), rates=[100.0])
    result = TuneResult([best, close, far, once], 2, 1.0, "budget")
    assert result.within_noise() == [close]
    shown = best.interval()
    assert shown.low < 100 < shown.high and shown.high - shown.low < 3


@pytest.mark.long
@pytest.mark.parametrize(
    ("fmt", "loader", "extra"),
    [
        ("npy", "dataloader", {"num_workers": 2, "prefetch_factor": 4, "persistent_workers": True, "in_order": False}),
        ("memmap", "tensorclass", {"num_workers": 1}),
        ("hdf5", "dataloader", {"num_workers": 2, "transform": "cpu:1"}),
        pytest.param(
            "lmdb",
            "nodes",
            {"num_workers": 2, "in_order": False, "prefetch_factor": 4},
            marks=NEEDS_TORCHDATA,
        ),
    ],
)
def test_the_pasted_script_runs_under_spawn_and_delivers_the_dataset(tmp_path, fmt, loader, extra):
    """The printed line had no imports, no path, a lambda collate (fails under spawn) and the per-item
    DataLoader instead of the batch reads that were measured."""
    invoke("prepare", "--size", "1000", "--data-dir", tmp_path / "data", "-q", "--formats", fmt)
    dataset = next((tmp_path / "data").iterdir())
    transform = extra.pop("transform", "none")
    c = replace(run_config(fmt, loader, batch_size=128, **extra), transform=transform, torch_threads=1)
    script = tmp_path / "best.py"
    script.write_text(best_script(c, "1 samples/s", dataset, "cpu"))
    assert "lambda" not in script.read_text() and "pickle" not in script.read_text()
    assert_formatted(script)
    for method in ("spawn", "forkserver"):
        done = run_pasted(script, method)
        assert done.returncode == 0, done.stderr
        assert re.findall(r"epoch \d: (\d+) samples", done.stdout) == ["1000"] * 3, done.stdout
        assert re.match(r"warm-up: \d+ untimed epoch\(s\)", done.stdout), "untimed epochs first, said in one line"
        assert done.stdout.count("warm-up") == 1
        rates = [float(r.replace(",", "")) for r in re.findall(r"epoch \d: .*, ([\d,]+)/s", done.stdout)]
        median = re.search(r"median of the timed epochs: ([\d,]+) samples/s; tune: 1 samples/s\n", done.stdout)
        assert median and float(median[1].replace(",", "")) == pytest.approx(sorted(rates)[1], abs=1), done.stdout


def test_the_pasted_batches_are_the_datasets_samples(tmp_path):
    """open_dataset reads whole batches (a run as one range) and they hold the prepared samples."""
    import numpy as np

    from iobench.api import open_dataset

    invoke("prepare", "--size", "300", "--data-dir", tmp_path / "data", "-q", "--formats", "npy,memmap")
    folder = next((tmp_path / "data").iterdir())
    features = np.load(folder / "npy" / "features.npy", allow_pickle=False)
    plain, tc = (
        open_dataset(folder, "npy"),
        open_dataset(folder, "memmap", tensorclass=True),
    )
    for indices in ([5, 6, 7, 8], [9, 2, 250]):
        x, y = plain.__getitems__(indices)
        assert np.array_equal(x.numpy(), features[indices]) and len(y) == len(indices)
        assert np.array_equal(tc.__getitems__(indices).features.numpy(), features[indices])
    assert np.array_equal(plain[3][0].numpy(), features[3])
    from iobench.api import Batches

    sampler = Batches(300, 64, shuffle=True, seed=1)
    epochs = [np.concatenate(list(sampler)) for _ in range(2)]
    assert all(sorted(e.tolist()) == list(range(300)) for e in epochs) and not np.array_equal(*epochs)
    assert [len(b) for b in Batches(300, 64, shuffle=False)] == [64, 64, 64, 64, 44]


@pytest.mark.long
def test_tune_ends_with_a_line_to_paste_and_resumes_from_its_records(tmp_path, cli, monkeypatch):
    real = importlib.util.find_spec  # worker processes only: the DataLoader's paste is what this test reads
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchdata" else real(name, *a))
    prepare_with_limits(tmp_path, "2000", "npy")
    results = tmp_path / "r.jsonl"
    args = ("tune", "--format", "npy", "--data-dir", tmp_path / "data", "--device", "cpu", "-q")
    budget = ("--budget-minutes", "60", "--rounds", "2")  # a budget of rounds: a busy machine cannot make it miss
    r = cli(*args, *budget, "--results", results, "--batch-size", "256")
    assert r.code == 0, r.err
    assert "best: npy/dataloader bs=256" in r.out and "stopped: 2 round(s), as --rounds asked" in r.out, r.out
    pasted = results.with_name("r-best.py")
    # npy through the DataLoader pastes as plain PyTorch and numpy: a training script does not depend on iobench
    assert f"paste (saved as {pasted}" in r.out and "sampler=Batches(len(dataset), 256, shuffle=True)" in r.out
    assert pasted.read_text() in r.out, "printed whole, unwrapped"
    assert "import iobench" not in pasted.read_text() and "from iobench" not in pasted.read_text()
    assert re.search(r"\d+ of \d+ candidates measured", r.out), r.out
    assert "best throughput by what loads: 1 process: " in r.out
    if CORES > 1:  # threads are named as threads, not counted as processes (tune searches them with torchdata)
        assert ("2 threads: " in r.out) == (importlib.util.find_spec("torchdata") is not None), r.out
    first = stored_records(results)
    assert len(first) >= (2 if CORES > 1 else 1) + 8 * CORES, "every candidate ran at least one round"
    r = cli(*args, *budget, "--results", results, "--batch-size", "256")
    assert r.code == 0, r.err
    assert re.search(r"resumed: \d+ candidate round\(s\) taken from", r.err), r.err
    assert len(stored_records(results)) == len(first), "a finished search runs nothing again"


def test_a_search_without_an_interval_says_inconclusive_and_pastes_nothing(capsys, tmp_path):
    """On 1e6 samples a 2-minute budget ended after 0 rounds and still printed a best, '95% CI 0-inf' and a paste."""
    from iobench.cli.render import print_tune
    from iobench.sessions.tune import TuneOutcome, recommendable
    from tests.conftest import record_of

    once = Candidate(run_config("npy", "dataloader"), rates=[100.0], records=[record_of()])
    never = Candidate(run_config("npy", "dataloader", num_workers=1))
    result = TuneResult([once, never], 1, 120.0, "budget")
    assert not recommendable(result)
    print_tune(TuneOutcome("npy", 2, result), tmp_path / "r.jsonl")
    printed = capsys.readouterr().out
    assert "inconclusive" in printed and "1 of 2 candidates" in printed
    assert "paste:" not in printed and "best:" not in printed


def test_an_unsettled_search_still_prints_the_best_measured_code_with_its_caveat(capsys, tmp_path):
    """`tune --format memmap --budget-minutes 2` said "inconclusive" and printed no code (issue 80): the user leaves
    with the best measured so far, as code, said to be unsettled."""
    from iobench.cli.render import print_tune
    from iobench.sessions.tune import TuneOutcome
    from tests.conftest import record_of

    once = Candidate(run_config("npy", "dataloader"), rates=[100.0], records=[record_of()])
    result = TuneResult([once], 1, 120.0, "budget")
    script = tmp_path / "r-best.py"
    outcome = TuneOutcome("npy", 2, result, script=script, script_text="print('the loop')\n", figure="100 samples/s")
    print_tune(outcome, tmp_path / "r.jsonl")
    printed = capsys.readouterr().out
    assert "inconclusive" in printed and "the best measured so far, not settled" in printed
    assert "paste (saved as" in printed and "print('the loop')" in printed


@pytest.mark.long
def test_tune_searches_with_the_users_transform(tmp_path, cli):
    """On photos with augmentation tune recommended 0 workers while 2 were faster with the augmentation."""
    prepare_with_limits(tmp_path, "256", "npy")
    r = cli(
        "tune",
        "--format",
        "npy",
        "--transform",
        "cpu:20",
        "--budget-minutes",
        "60",
        "--rounds",
        "1",
        "--device",
        "cpu",
        "-q",
        "--data-dir",
        tmp_path / "data",
        "--results",
        tmp_path / "r.jsonl",
    )
    assert r.code == 0, r.err
    records = stored_records(tmp_path / "r.jsonl")
    assert records and {x["transform"] for x in records} == {"cpu:20"}


def test_the_printed_interval_is_the_medians_and_holds_it():
    """On a loaded machine the mean's interval (2,479,582-4,211,468) missed the printed median (1,777,670)."""
    from iobench.judge.intervals import median_interval

    skewed = [1.3e6, 1.5e6, 1.6e6, 1.7e6, 1.75e6, 1.78e6, 1.8e6, 6.5e6, 6.9e6, 7.1e6, 7.4e6, 7.7e6]
    low, high, coverage = median_interval(skewed)
    assert low <= statistics.median(skewed) <= high and coverage >= 0.95
    mean, half = statistics.fmean(skewed), 1.96 * statistics.stdev(skewed) / len(skewed) ** 0.5
    assert not mean - half <= statistics.median(skewed) <= mean + half  # what the old interval did
    assert median_interval([5.0, 1.0, 3.0, 2.0, 4.0]) == (1.0, 5.0, 1 - 2 / 2**5)  # five cannot reach 95%
    assert median_interval([float(i) for i in range(9)])[:2] == (1.0, 7.0)  # x_(2)..x_(8): 96%
    assert median_interval([3.0])[1] == math.inf


def test_against_object_storage_the_search_is_requests_in_flight():
    """Workers 0..cores, each with 1, 4 or 16 fetch threads: the knobs that move a remote epoch; prefetch,
    persistence and order keep their defaults."""
    from iobench.settings import SETTINGS

    found = candidates(
        RunConfig(format="npy"), "npy", cuda=False, batch_sizes=None, loaders=(L.DATALOADER,), remote=True
    )
    assert sorted((c.settings.num_workers, c.settings.fetch_threads) for c in found) == sorted(
        (n, t) for n in range(CORES + 1) for t in SETTINGS["fetch_threads"].tune_remote
    )
    assert {c.loader.value for c in found} == {"dataloader"}
    assert all(c.settings.prefetch_factor is None and c.settings.in_order for c in found)


@NEEDS_TORCHDATA
def test_against_object_storage_nodes_are_searched_with_more_threads_than_cores():
    """torchdata.nodes with 4 and 16 threads beside 1..cores, each reading a batch or a sample at a time."""
    base = RunConfig(format="npy")
    found = candidates(base, "npy", cuda=False, batch_sizes=None, loaders=(L.DATALOADER, L.NODES), remote=True)
    nodes = sorted((c.settings.num_workers, c.settings.fetch.value) for c in found if c.loader.value == "nodes")
    assert nodes == sorted((n, f) for n in {*range(1, CORES + 1), 4, 16} for f in ("batch", "item"))
    plain = candidates(base, "npy", cuda=False, batch_sizes=None, loaders=(L.DATALOADER,), remote=True)
    assert len(found) == len(plain) + len(nodes)


def test_the_command_to_measure_again_names_every_setting_the_search_changed():
    from iobench.plan.paste import run_command

    c = run_config("npy", "dataloader", num_workers=2, fetch_threads=16, batch_size=256, shuffle=False)
    typed = run_command(c, ["--remote", "s3-like", "--data-dir", "my data"], "cpu")
    assert typed == (
        "iobench run --remote s3-like --data-dir 'my data' --format npy --loader dataloader --device cpu "
        "--batch-size 256 --num-workers 2 --cache warm --fetch-threads 16 --no-shuffle"
    )
    item = run_command(run_config("files", "dataloader", fetch="item", num_workers=1), [], "cpu")
    assert item.endswith("--num-workers 1 --cache warm --fetch item")


@pytest.mark.long
def test_a_trial_in_a_process_of_its_own_gives_the_record_or_one_line(tmp_path):
    """tune --remote's trials: the record comes back whole; an error in the trial is one line here, and the
    trial's process is gone either way."""
    import multiprocessing
    import shutil

    import torch

    from iobench.errors import IobenchError
    from iobench.plan.resolve import RunTarget, resolve
    from iobench.run.isolated import run_isolated

    invoke("prepare", "--size", "300", "--shape", "4", "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    (dataset,) = (tmp_path / "data").iterdir()
    resolved = resolve(
        run_config("npy", "dataloader", runs=1, cache="as-is", warmup=0), RunTarget(dataset, torch.device("cpu"))
    )
    record = run_isolated(resolved, None)
    assert record.epochs.samples_per_epoch == 300 and record.config.format == "npy"
    shutil.copy(dataset / "npy" / "features.npy", tmp_path / "kept.npy")
    with open(dataset / "npy" / "features.npy", "r+b") as f:
        f.truncate(1000)  # the trial's reader finds it cut short
    with pytest.raises(IobenchError) as refused:
        run_isolated(resolved, None)
    assert "\n" not in str(refused.value) and "features.npy" in str(refused.value)
    assert [p for p in multiprocessing.active_children() if p.name == "iobench-trial"] == []


STEP_MODULE = """
from pathlib import Path

def step(features, labels):
    with open(Path(__file__).with_name("calls.txt"), "a") as f:
        f.write(f"{len(features)} {labels.device}\\n")
"""


@pytest.mark.long
@pytest.mark.parametrize(
    ("fmt", "loader", "step"),
    [
        ("npy", "dataloader", "paste_step:step"),
        ("memmap", "tensorclass", "paste_step:step"),
        ("npy", "dataloader", "sleep:1"),
        ("npy", "dataloader", "mlp"),
    ],
)
def test_the_pasted_script_samples_and_steps_as_tune_measured(tmp_path, monkeypatch, fmt, loader, step):
    """The pasted script sampled with RandomSampler and BatchSampler (a Python list per batch: 0.07 s an epoch on its
    own, the script at 0.64-0.74 of tune's figure beside load) where iobench draws a numpy array per batch, and it left
    the user's --step out (the photos' search measured 137 images/s with it)."""
    invoke("prepare", "--size", "1000", "--data-dir", tmp_path / "data", "-q", "--formats", fmt)
    dataset = next((tmp_path / "data").iterdir())
    (tmp_path / "paste_step.py").write_text(STEP_MODULE)
    monkeypatch.chdir(tmp_path)
    c = replace(run_config(fmt, loader, batch_size=128), step=step)
    script = tmp_path / "elsewhere" / "best.py"
    script.parent.mkdir()
    script.write_text(best_script(c, "1 samples/s", dataset, "cpu", folder=tmp_path))
    text = script.read_text()
    assert "RandomSampler" not in text and "BatchSampler" not in text and "class Batches" in text
    assert_formatted(script)
    done = run_pasted(script, "fork")
    assert done.returncode == 0, done.stderr
    if step == "paste_step:step":  # called with every batch of the warm-up epochs and the 3 timed ones, on the device
        calls = (tmp_path / "calls.txt").read_text().split("\n")[:-1]
        warmed = int(re.search(r"warm-up: (\d+) untimed", done.stdout)[1])
        epochs = warmed + done.stdout.count("epoch ")
        assert warmed >= 1 and done.stdout.count("epoch ") == 3
        assert len(calls) == epochs * 8 and {c.split()[1] for c in calls} == {"cpu"}
        assert sum(int(c.split()[0]) for c in calls) == epochs * 1000
    else:
        assert "stand_in_step(" in text and done.stdout.count("epoch ") == 3
