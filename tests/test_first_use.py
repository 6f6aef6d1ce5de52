"""First use on a fresh or busy machine: what a newcomer types works, and answers at once."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from tests.conftest import ROOT, invoke, stored_records


def test_a_default_sweep_runs_over_what_a_default_prepare_writes(tmp_path, cli):
    """`prepare` then `sweep --batch-size 256,1024` stopped at "files is not prepared"."""
    invoke("prepare", "--size", "400", "--data-dir", tmp_path / "data", "-q")
    r = cli("sweep", "--batch-size", "64,128", "--runs", "1", "--device", "cpu", "-q",
            "--data-dir", tmp_path / "data", "--results", tmp_path / "r.jsonl")  # fmt: skip
    assert r.code == 0, r.err
    records = stored_records(tmp_path / "r.jsonl")
    assert {x["format"] for x in records} == {"npy", "hdf5", "lmdb", "memmap"}
    assert {x["batch_size"] for x in records} == {64, 128}


def test_a_sweep_prepares_the_formats_its_dataset_lacks(tmp_path, cli):
    invoke("prepare", "--size", "300", "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    r = cli("sweep", "--format", "npy,hdf5", "--loader", "dataloader", "--runs", "1", "--device", "cpu", "-q",
            "--data-dir", tmp_path / "data", "--results", tmp_path / "r.jsonl")  # fmt: skip
    assert r.code == 0, r.err
    assert "preparing" in r.err and "hdf5" in r.err
    (dataset,) = (tmp_path / "data").iterdir()
    assert (dataset / "hdf5").is_dir()
    assert {x["format"] for x in stored_records(tmp_path / "r.jsonl")} == {"npy", "hdf5"}


def test_loaders_without_formats_read_the_default_formats():
    from iobench.run.selection import parse_pairs

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
    from iobench.results.record import LimitShare
    from iobench.results.warnings import Kind, record_warnings
    from tests.conftest import record_of

    def share(percent):
        return replace(
            record_of(),
            limit=LimitShare(limit_name="memory_gather_mb_per_s", limit_mb_per_s=10.0, percent_of_limit=percent),
        )

    def above(percent):
        return [w.console() for w in record_warnings([share(percent)]) if w.kind is Kind.ABOVE_CEILING]

    assert len(above(213.0)) == 1 and "213% of its ceiling memory_gather_mb_per_s" in above(213.0)[0]
    assert above(100.0) == [] and above(104.9) == []  # within the noise


def test_the_ceilings_are_the_best_of_several_methods_and_say_which(tmp_path):
    from iobench.run.limits import memory_gather_mb_per_s, page_cache_mb_per_s, storage_read_mb_per_s

    path = tmp_path / "probe.bin"
    path.write_bytes(np.random.default_rng(0).integers(0, 255, 16 * 2**20, dtype=np.uint8).tobytes())
    for sample in (520, 150_528):  # the large rows try a copy per row as well
        rate, method = memory_gather_mb_per_s(path, sample)
        assert rate > 0 and method in (
            "torch index_select", "numpy take into a preallocated batch", "numpy fancy index", "a copy per row"
        )  # fmt: skip
    rate, method = storage_read_mb_per_s(path)
    assert rate > 0 and ("O_DIRECT" in method or "buffered" in method), method
    assert page_cache_mb_per_s(path) > 0
