"""`iobench run` end to end on a tiny dataset: records, table, and one-line refusals."""

import json

import pytest

from tests.conftest import assert_one_line_error

SIZE = "3000"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from iobench.cli import main

    root = tmp_path_factory.mktemp("run")
    with pytest.raises(SystemExit) as info:
        main(["prepare", "--size", SIZE, "--data-dir", str(root), "-q", "--formats", "npy,lmdb,memmap"])
    assert info.value.code == 0
    return root


def test_default_comparison_writes_one_record_per_row(data, cli, tmp_path):
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--data-dir",
        data,
        "--device",
        "cpu",
        "--runs",
        "2",
        "--results",
        results,
        "-q",
        "--format",
        "npy,memmap,lmdb",
    )
    assert r.code == 0, r.err
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(x["format"], x["loader"]) for x in records] == [
        ("npy", "dataloader"),
        ("memmap", "dataloader"),
        ("memmap", "tensorclass"),
        ("lmdb", "dataloader"),
    ]
    for x in records:
        assert len(x["epoch_seconds"]) == 2 and x["samples_per_epoch"] == 3000
        assert x["epoch_seconds_min"] <= x["epoch_seconds_median"] <= x["epoch_seconds_max"]
        assert x["mb_per_s"] == pytest.approx(3000 * x["sample_bytes"] / 1e6 / x["epoch_seconds_median"])
        for field in (
            "python_version",
            "torch_version",
            "tensordict_version",
            "cpu_model",
            "kernel",
            "data_filesystem",
            "git_sha",
            "device",
            "shuffle",
            "num_workers",
            "pin_memory",
        ):
            assert field in x, field
        assert x["device"] == "cpu" and x["pin_memory"] is False and x["partial"] is False
    assert "fastest" in r.out and "memmap" in r.out and "tensorclass" in r.out


def test_partial_runs_say_so(data, cli, tmp_path):
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--data-dir",
        data,
        "--device",
        "cpu",
        "--format",
        "npy",
        "--loader",
        "dataloader",
        "--fetch",
        "item",
        "--max-batches",
        "2",
        "--runs",
        "1",
        "--warmup",
        "0",
        "--results",
        results,
        "-q",
    )
    assert r.code == 0, r.err
    (x,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert x["partial"] is False and x["batches_per_epoch"] == 2 and x["samples_per_epoch"] == 2048
    assert x["max_batches"] == 2


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--format", "hdf5", "--loader", "dataloader"], ["hdf5 is not prepared"]),
        (["--device", "cuda"], ["no CUDA GPU"]),
        (["--device", "tpu"], ["device"]),
        (["--prefetch-factor", "4"], ["--prefetch-factor needs --num-workers"]),
        (["--loader", "tensorclass", "--format", "lmdb"], ["does not read"]),
        (["--format", "parquet"], ["unknown format"]),
        (["--step", "train"], ["unknown step"]),
        (["--dataset", "nope"], ["not an iobench dataset"]),
        (["--runs", "0"], ["--runs"]),
    ],
)
def test_bad_input_is_one_line(data, cli, tmp_path, args, fragments):
    r = cli("run", "--data-dir", data, "--results", tmp_path / "r.jsonl", "-q", *args)
    assert_one_line_error(r, *fragments)
    assert not (tmp_path / "r.jsonl").exists()


def test_truncated_file_is_named(data, cli, tmp_path):
    (dataset_dir,) = [p for p in data.iterdir() if p.is_dir()]
    path = dataset_dir / "npy" / "labels.npy"
    original = path.read_bytes()
    try:
        path.write_bytes(original[:-8])
        r = cli("run", "--data-dir", data, "--format", "npy", "--device", "cpu", "-q", "--results", tmp_path / "r")
        assert_one_line_error(r, "labels.npy", "truncated")
        path.unlink()
        r = cli("run", "--data-dir", data, "--format", "npy", "--device", "cpu", "-q", "--results", tmp_path / "r")
        assert_one_line_error(r, "labels.npy", "missing")
    finally:
        path.write_bytes(original)


def test_no_dataset_prepares_a_small_default_one(tmp_path, cli, monkeypatch):
    import iobench.cli

    monkeypatch.setattr(iobench.cli, "DEFAULT_SIZE", 500)
    r = cli(
        "run",
        "--data-dir",
        tmp_path / "empty",
        "--device",
        "cpu",
        "--format",
        "npy",
        "--runs",
        "1",
        "--results",
        tmp_path / "r.jsonl",
        "-q",
    )
    assert r.code == 0, r.err
    assert "no dataset" in r.err and "preparing the default one" in r.err
    assert (tmp_path / "empty" / "n500_128_float32_c1000_s0" / "manifest.json").is_file()
