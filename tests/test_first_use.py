"""First use on a fresh or busy machine: what a newcomer types works, and answers at once."""

from __future__ import annotations

import subprocess
import sys

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
