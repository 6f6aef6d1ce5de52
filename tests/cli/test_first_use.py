"""First use on a fresh or busy machine: what a newcomer types works, and answers at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from tests.conftest import ROOT, assert_one_line_error, invoke, stored_records

pytestmark = pytest.mark.e2e


@pytest.mark.long
def test_a_default_sweep_runs_over_what_a_default_prepare_writes(tmp_path, cli):
    """`prepare` then `sweep --batch-size 256,1024` stopped at "files is not prepared"."""
    invoke("prepare", "--size", "400", "--data-dir", tmp_path / "data", "-q")
    r = cli(
        "sweep",
        "--batch-size",
        "64,128",
        "--runs",
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
    assert {x["format"] for x in records} == {"npy", "hdf5", "lmdb", "memmap"}
    assert {x["batch_size"] for x in records} == {64, 128}


@pytest.mark.long
def test_a_sweep_prepares_the_formats_its_dataset_lacks(tmp_path, cli):
    invoke("prepare", "--size", "300", "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    r = cli(
        "sweep",
        "--format",
        "npy,hdf5",
        "--loader",
        "dataloader",
        "--runs",
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
    assert "preparing" in r.err and "hdf5" in r.err
    (dataset,) = (tmp_path / "data").iterdir()
    assert (dataset / "hdf5").is_dir()
    assert {x["format"] for x in stored_records(tmp_path / "r.jsonl")} == {"npy", "hdf5"}


def test_loaders_without_formats_read_the_default_formats():
    from iobench.plan.selection import parse_pairs

    pairs, _ = parse_pairs(None, "dataloader")
    assert [f for f, _ in pairs] == ["npy", "hdf5", "lmdb", "memmap"]


@pytest.mark.parametrize(
    "args",
    [["--help"], ["run", "--help"], ["prepare", "--help"], ["run", "--batch-size", "abc"], ["prepare", "--bogus"]],
)
def test_help_and_argument_errors_load_no_heavy_library(args):
    """`iobench --help` took 4.4 s: the CLI imported tensordict, and with it torch and torch._dynamo.
    Time is measured by scripts/bench_startup.py; this checks the cause, which does not vary with load."""
    code = (
        "import sys\nfrom iobench.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'numpy', 'tensordict', 'h5py', 'lmdb', 'matplotlib') if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert "HEAVY []" in done.stderr, done.stderr[-2000:]


def test_a_figure_above_its_ceiling_is_called_a_broken_ceiling():
    """Warm shuffled npy showed 142% and 213% of its memory-gather limit without a word."""
    from iobench.judge.warnings import Kind, record_warnings
    from iobench.results.limits import LimitShare
    from tests.conftest import record_of

    def share(percent):
        return replace(
            record_of(),
            limit=LimitShare(limit_name="memory_gather_mb_per_s", limit_mb_per_s=10.0, percent_of_limit=percent),
        )

    def above(percent):
        return [w.console() for w in record_warnings([share(percent)]) if w.kind is Kind.ABOVE_CEILING]

    assert len(above(213.0)) == 1 and "213% of its ceiling, the in-memory gather of these samples" in above(213.0)[0]
    assert above(100.0) == [] and above(104.9) == []  # within the noise


def test_the_ceilings_are_the_best_of_several_methods_and_say_which(tmp_path):
    from iobench.measuring.read_rates import memory_gather_mb_per_s, page_cache_mb_per_s
    from iobench.storage.local.disk_limits import BUFFERED_CHUNKS, DIRECT_SHAPES, storage_read_mb_per_s

    path = tmp_path / "probe.bin"
    path.write_bytes(np.random.default_rng(0).integers(0, 255, 16 * 2**20, dtype=np.uint8).tobytes())
    for sample in (520, 150_528):  # the large rows try a copy per row as well
        rate, method = memory_gather_mb_per_s(path, sample)
        assert rate > 0 and method in (
            "torch index_select",
            "numpy take into a preallocated batch",
            "numpy fancy index",
            "a copy per row",
        )
    rate, method = storage_read_mb_per_s(path)
    assert rate > 0 and ("O_DIRECT" in method or "buffered" in method), method
    if "also" in method:  # O_DIRECT worked: every way was tried, the best named, the others with their rates
        assert method.count("MB/s") == len(DIRECT_SHAPES) + len(BUFFERED_CHUNKS) - 1, method
    assert page_cache_mb_per_s(path) > 0


def test_other_programs_cpu_is_measured_and_rivals_are_not_counted(monkeypatch):
    """A busy machine silently collapsed torch's paths (9.5x); now its CPU use is measured: the machine's busy time
    less this process's and its rivals'. The accounting is checked on scripted counters (on the machine's own, a
    test failed when another program took the cores: 1.72 < 2.02 - 0.5)."""
    from iobench.system import contention
    from iobench.system.contention import contending, other_cores_busy

    hz = os.sysconf("SC_CLK_TCK")
    machine = iter([1000, 1000 + 3 * hz])  # three cores busy over the sample
    own = {os.getpid(): iter([50, 50 + hz // 2]), 4242: iter([0, hz])}  # this process half a core, the rival one
    monkeypatch.setattr(contention, "_busy_jiffies", lambda: next(machine))
    monkeypatch.setattr(contention, "process_jiffies", lambda pid: next(own[pid]))
    monkeypatch.setattr(contention.time, "sleep", lambda s: None)
    assert other_cores_busy(1.0, rivals=(4242,)) == pytest.approx(1.5)
    monkeypatch.undo()
    with contending(1) as rivals:  # the rivals are real processes, and gone after the block
        assert len(rivals) == 1 and other_cores_busy(0.2, rivals=rivals) is not None
    assert subprocess.run(["kill", "-0", str(rivals[0])], capture_output=True).returncode != 0, "rival outlived it"


def test_a_runs_before_sample_is_the_last_after_sample_when_it_just_ended(monkeypatch):
    """tune runs candidates back to back: the 0.25 s before each is the previous one's after, not a new
    wait; a sample older than `recent`, or taken with other rivals, is not reused."""
    from iobench.system import contention

    clock = [100.0]
    sleeps = []
    monkeypatch.setattr(contention.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(contention.time, "sleep", sleeps.append)
    monkeypatch.setattr(contention, "_last_sample", None)
    first = contention.other_cores_busy(0.25)
    assert contention.other_cores_busy(0.25, recent=1.0) == first and len(sleeps) == 1
    assert contention.other_cores_busy(0.25, rivals=(1,), recent=1.0) is not None and len(sleeps) == 2
    clock[0] += 1.5
    contention.other_cores_busy(0.25, rivals=(1,), recent=1.0)
    contention.other_cores_busy(0.25)  # without `recent`, always a new sample
    assert len(sleeps) == 4


def test_a_busy_machine_is_warned_about_and_sharing_settings_are_part_of_a_runs_identity():
    from iobench.judge.warnings import Kind, record_warnings
    from iobench.results.record_base import HostLoad
    from tests.conftest import record_of

    def busy(cores):
        r = record_of()
        return replace(r, host=HostLoad(other_cpu_before=cores, load_before=1.2, load_after=1.3))

    assert Kind.BUSY in [w.kind for w in record_warnings([busy(1.0)])]
    assert Kind.BUSY not in [w.kind for w in record_warnings([busy(0.05)])]
    base = record_of()
    for change in ({"torch_threads_asked": 1}, {"cpu_contention": 1}, {"eviction": "fadvise"}):
        assert record_of(**change).identity() != base.identity(), change


def test_runs_record_the_threads_the_rivals_and_the_load(tmp_path, cli):
    invoke("prepare", "--size", "300", "--formats", "memmap", "--data-dir", tmp_path / "data", "-q")
    r = cli(
        "run",
        "--format",
        "memmap",
        "--loader",
        "tensorclass",
        "--torch-threads",
        "1",
        "--cpu-contention",
        "1",
        "--runs",
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
    (x,) = stored_records(tmp_path / "r.jsonl")
    assert x["torch_threads_asked"] == 1 == x["torch_threads"] == x["cpu_contention"]
    assert x["load_before"] >= 0 and x["other_cpu_before"] >= 0 and x["other_cpu_after"] >= 0
    assert "threads=1 rivals=1" in r.out


def test_tune_tries_one_thread_beside_the_loading_whoever_loads():
    from iobench.loaders import LoaderName
    from iobench.run.tune_candidates import candidates
    from iobench.system.environment import usable_cores
    from tests.conftest import run_config

    pair = (LoaderName.DATALOADER, LoaderName.TENSORCLASS)
    found = candidates(run_config("memmap", "dataloader"), "memmap", False, None, pair)
    main_process = {c.torch_threads for c in found if c.settings.num_workers == 0}
    assert main_process == ({None, 1} if usable_cores() > 1 else {None})
    fixed = candidates(replace(run_config("memmap", "dataloader"), torch_threads=2), "memmap", False, None, pair)
    assert {c.torch_threads for c in fixed} == {2}  # --torch-threads given: not searched
    # torch's threads fight the workers for the cores too (2 threads against 2 decode workers on 2 cores)
    assert {c.torch_threads for c in found if c.settings.num_workers > 0} == main_process


def test_a_batch_larger_than_the_dataset_is_warned_about():
    """1024 on 400 samples ran one batch per epoch without a word."""
    from iobench.judge.warnings import Kind, record_warnings
    from tests.conftest import record_of

    assert Kind.ONE_BATCH in [w.kind for w in record_warnings([record_of(batch_size=1024, n_samples=400)])]
    assert Kind.ONE_BATCH not in [w.kind for w in record_warnings([record_of(batch_size=16, n_samples=400)])]


def test_the_commit_is_found_for_an_install_from_a_checkout(monkeypatch, tmp_path):
    """git_sha was `unknown` under the console script of a `pip install .` and a SHA under `python -m`."""
    from importlib import metadata

    from iobench.system import environment

    class Installed:
        def read_text(self, name):
            return json.dumps({"url": ROOT.as_uri(), "dir_info": {}}) if name == "direct_url.json" else None

    monkeypatch.setattr(metadata, "distribution", lambda name: Installed())
    assert environment._source_folders()[-1] == ROOT
    monkeypatch.setattr(environment, "_source_folders", lambda: [tmp_path, ROOT])  # site-packages: no git there
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    if not head:
        pytest.skip("not run from a git checkout")
    assert environment.git_sha().startswith(head.strip())
    monkeypatch.setattr(environment, "_source_folders", lambda: [tmp_path])
    assert environment.git_sha() == "unknown"


def test_help_texts_keep_their_brackets_and_errors_speak_plainly(cli):
    def flat(text):  # the help as one line: rich wraps it in boxes at 80 columns
        return text.replace("\n", "").replace("│", "").replace(" ", "")

    assert "iobench[ray]" in flat(cli("run", "--help").out)
    assert "[default:1000]" in flat(cli("prepare", "--help").out)
    r = cli("run", "--batch-size", "abc")
    assert r.code == 2 and "expected a whole number" in r.err and "Input should be" not in r.err


def test_compare_decides_with_the_noise_and_refuses_files_with_nothing_in_common(tmp_path, cli):
    from tests.conftest import FLAT_RECORD

    a, b, other = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "o.jsonl"
    a.write_text(json.dumps(FLAT_RECORD) + "\n")  # epochs 0.1-0.3 s around 0.2: a 100% spread
    faster = [s / 1.2 for s in FLAT_RECORD["epoch_seconds"]]
    b.write_text(json.dumps({**FLAT_RECORD, "epoch_seconds": faster}) + "\n")
    r = cli("compare", a, b)
    assert r.code == 0 and "their intervals overlap" in r.out and "1 no decidable difference" in r.out, r.out
    b.write_text(json.dumps({**FLAT_RECORD, "epoch_seconds": [s / 4 for s in FLAT_RECORD["epoch_seconds"]]}) + "\n")
    r = cli("compare", a, b)
    assert r.code == 0 and "+300.0%" in r.out and "1 faster" in r.out, r.out
    other.write_text(json.dumps({**FLAT_RECORD, "format": "hdf5"}) + "\n")
    r = cli("compare", a, other)
    assert r.code == 2 and "no configuration in common" in r.err


def test_several_datasets_run_the_most_recently_prepared_and_say_so(tmp_path, cli):
    """`prepare --from photos/` then `run` measured the default 1,000,000-row dataset (8 min 23 s): among several,
    the most recently prepared that has the formats asked for is measured, and the first line says which."""
    import os

    from iobench.data.manifest import find_run_dataset

    data = tmp_path / "data"
    invoke("prepare", "--size", "300", "--formats", "npy", "--data-dir", data, "-q")
    invoke("prepare", "--size", "200", "--formats", "npy,hdf5", "--data-dir", data, "-q")
    older, newer = data / "n300_128_float32_c1000_s0", data / "n200_128_float32_c1000_s0"
    os.utime(older / "manifest.json", (1, 1))
    r = cli(
        "run",
        "--format",
        "npy",
        "--runs",
        "1",
        "--device",
        "cpu",
        "-q",
        "--data-dir",
        data,
        "--results",
        tmp_path / "r.jsonl",
    )
    assert r.code == 0 and r.err.splitlines()[0].startswith(f"dataset: {newer.name}, the most recently prepared"), r.err
    assert stored_records(tmp_path / "r.jsonl")[0]["n_samples"] == 200
    os.utime(newer / "manifest.json", (0, 0))
    assert find_run_dataset(data, None, ("npy",)) == older
    assert find_run_dataset(data, None, ("hdf5",)) == newer  # the only one with the format


def test_keep_best_keeps_each_ceilings_best_measurement():
    """On a virtual disk the speed moves by 2x between minutes: limits measured before and after a study
    keep the best of each, so no figure of the study beats its ceiling by a lucky minute."""
    from iobench.measuring.machine_limits import best_of
    from iobench.results.limits import MachineLimits

    a = MachineLimits(
        hostname="h",
        data_device="d",
        storage_read_mb_per_s=900.0,
        storage_read_method="A",
        page_cache_read_mb_per_s=8000.0,
        memory_gather_mb_per_s=5000.0,
        memory_gather_method="x",
        random_read_4k_qd32_iops=100.0,
        measured_at="t1",
    )
    b = MachineLimits(
        hostname="h",
        data_device="d",
        storage_read_mb_per_s=1500.0,
        storage_read_method="B",
        page_cache_read_mb_per_s=7000.0,
        memory_gather_mb_per_s=6000.0,
        memory_gather_method="y",
        random_read_4k_qd32_iops=None,
        measured_at="t2",
    )
    best = best_of(a, b)
    assert (best.storage_read_mb_per_s, best.storage_read_method) == (1500.0, "B")
    assert best.page_cache_read_mb_per_s == 8000.0 and best.random_read_4k_qd32_iops == 100.0
    assert (best.memory_gather_mb_per_s, best.memory_gather_method) == (6000.0, "y")
    assert best.measured_at == "t1 and t2, best of each"


def test_the_dataset_picked_is_named_and_the_one_with_the_format_is_pointed_to(tmp_path, cli):
    """With two datasets, `run --format files` picked the one without files and advised preparing a
    million files on it."""
    data = tmp_path / "data"
    invoke("prepare", "--size", "300", "--shape", "4", "--data-dir", data, "-q", "--formats", "npy")
    invoke("prepare", "--size", "200", "--shape", "4", "--data-dir", data, "-q", "--formats", "npy,files")
    with_files = "n200_4_float32_c1000_s0"
    common = ("--data-dir", data, "--results", tmp_path / "r.jsonl", "--runs", "1", "--device", "cpu", "-q")
    r = cli("run", "--format", "files", "--loader", "dataloader", *common)
    assert r.code == 0, r.err
    assert f"dataset: {with_files}" in r.err and stored_records(tmp_path / "r.jsonl")[0]["dataset"] == with_files
    r = cli("run", "--format", "files", "--dataset", "n300_4_float32_c1000_s0", *common)
    assert_one_line_error(r, f"`--dataset {with_files}` has it")


def test_an_empty_folder_says_what_it_will_write_and_offers_a_small_one(tmp_path, cli, monkeypatch):
    from iobench.run import preparing as session

    monkeypatch.setattr(session, "DEFAULT_SIZE", 3000)
    monkeypatch.setattr(session, "QUICK_SIZE", 500)
    empty = tmp_path / "empty"
    empty.mkdir()
    common = (
        "--format",
        "npy",
        "--loader",
        "dataloader",
        "--runs",
        "1",
        "--device",
        "cpu",
        "--results",
        tmp_path / "r.jsonl",
        "--data-dir",
        empty,
    )
    r = cli("run", *common)
    assert r.code == 0, r.err
    assert (
        "preparing it first (3,000 samples, up to about 2 MB on disk for npy); `--size 5e2` makes a smaller one"
        in r.err
    )
    r = cli("run", *common, "--size", "500")
    assert (
        r.code == 0 and "no dataset n500_128_float32_c1000_s0" in r.err and "smaller" not in r.err.split("preparing")[1]
    )
    assert [x["n_samples"] for x in stored_records(tmp_path / "r.jsonl")] == [3000, 500]
    r = cli("run", *common, "--size", "500", "--dataset", "x")
    assert_one_line_error(r, "--size and --dataset both name a dataset")


def test_a_run_of_several_configurations_says_where_it_stands():
    from iobench.run.estimates import standing as _place

    assert _place(0, 1, 0.0) == ""
    assert _place(0, 5, 0.0) == "configuration 1 of 5"
    assert _place(2, 5, 60.0) == "configuration 3 of 5, about 2 min left"  # 30 s each so far, 3 to go
    assert _place(1, 5, 10.0) == "configuration 2 of 5, about 40 s left"
    assert _place(1, 5, 600.0) == "configuration 2 of 5, about 40 min left"


@pytest.mark.long
@pytest.mark.slow
def test_ctrl_c_keeps_the_finished_records_and_prints_their_table(tmp_path):
    """An interrupted run said only 'interrupted'; what finished is kept and shown."""
    import signal
    import time

    data = tmp_path / "data"
    invoke("prepare", "--size", "20000", "--shape", "16", "--data-dir", data, "-q", "--formats", "npy,files")
    results = tmp_path / "r.jsonl"
    command = [
        sys.executable,
        "-m",
        "iobench",
        "run",
        "--format",
        "npy,files",
        "--loader",
        "dataloader",
        "--epochs",
        "3",
        "--runs",
        "1",
        "--device",
        "cpu",
        "--data-dir",
        str(data),
        "--results",
        str(results),
    ]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, COLUMNS="200", PYTHONUNBUFFERED="1"),
    )
    said: list[str] = []
    import threading

    reader = threading.Thread(target=lambda: said.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    # the second configuration has begun (its line is said as it starts) and the first's record is written: however
    # busy the machine, the interrupt lands inside the second (files: seconds per epoch), not around the first
    while not (any("configuration 2 of 2" in line for line in said) and results.is_file()):
        assert proc.poll() is None and time.monotonic() < deadline, "".join(said)[-2000:]
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    proc.wait(timeout=60)
    reader.join(timeout=10)
    err = "".join(said)
    assert proc.returncode == 130, err
    assert "interrupted after 1 of 2 configurations; their records are kept" in err
    assert "npy" in out and "dataloader" in out and "1 record(s) appended" in out, out
    assert len(stored_records(results)) == 1


def test_the_time_left_is_the_estimates_at_the_measured_pace_plus_the_fixed_cost_per_run():
    """'about 14 min' took 127 s and 'about 71 s' took 222 s: one figure from three batches. The total is said once,
    before the first configuration (its line no longer repeats it in other words); after it, each configuration ahead
    is its estimated epochs at the pace the finished epochs kept, plus the fixed cost per run they showed."""
    from iobench.run.estimates import Estimate, Finished
    from iobench.run.estimates import standing as _place
    from iobench.run.estimates import time_range as _range

    estimates = [Estimate(20.0, 40.0), Estimate(20.0, 40.0), Estimate(60.0, 120.0)]
    assert _place(0, 3, 0.0, estimates) == "configuration 1 of 3"
    # the first's epochs took 90 s where 30 s was its middle, with nothing besides: the rest, 120 s of middles, at a
    # pace between 3x and their estimates, as far as 30 s of epochs weigh against 120 (sqrt(0.2): 1.89x)
    assert _place(1, 3, 90.0, estimates, [Finished(90.0, 90.0, 1)]) == "configuration 2 of 3, about 4 min left"
    assert _place(2, 3, 180.0, estimates, [Finished(90.0, 90.0, 1)] * 2) == "configuration 3 of 3, about 3 min left"
    assert _range(50.0, 52.0) == "50-52 s" and _range(60.0, 600.0) == "60 s-10 min" and _range(30.0, 30.2) == "30 s"


def test_a_tiny_first_configuration_does_not_inflate_the_time_left_of_a_large_one():
    """npy then files on 20,000 samples: "about 4-5 s in all", then after 5.1 s "about 2 min left", and it ended at
    12.1 s: the tiny first configuration's fixed cost (its loader, its workers) had scaled the large one's estimate.
    Here the first is estimated at 0.05 s of epochs and took 2.5 s (2.45 s of it fixed); the second, estimated at 4 s
    of epochs in 3 runs, then takes about 4 s plus 3 runs' fixed cost: 11.35 s, within 2x of what is said."""
    from iobench.run.estimates import Estimate, Finished, minutes
    from iobench.run.estimates import standing as _place

    estimates = [Estimate(0.04, 0.06, runs=1), Estimate(3.5, 4.5, runs=3)]
    real = 4.0 + 3 * 2.45
    said = _place(1, 2, 2.5, estimates, [Finished(2.5, 0.05, 1)])
    seconds = float(said.split("about ")[1].split()[0])
    assert said.endswith("s left") and real / 2 <= seconds <= real * 2, said
    assert minutes(2.5 / 0.05 * 4.0) == "3 min", "what the scaled estimate said: 18x the real remainder"
