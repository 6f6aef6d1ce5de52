"""`iobench run` end to end on a tiny dataset: records, table, and one-line refusals."""

import pytest

from tests.conftest import assert_one_line_error, invoke, stored_records

pytestmark = pytest.mark.e2e

SIZE = "3000"


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    """A results folder whose limits.json is already measured (with a small probe, to stay fast)."""
    folder = tmp_path_factory.mktemp("results")
    invoke("limits", "--data-dir", folder, "--results", folder / "r.jsonl", "--probe-size", "16M")
    return folder


@pytest.fixture
def results(results_dir, request):
    return results_dir / f"{request.node.name}.jsonl"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    invoke("prepare", "--size", SIZE, "--data-dir", root, "-q", "--formats", "npy,lmdb,memmap")
    return root


@pytest.mark.long
def test_default_comparison_writes_one_record_per_row(data, cli, results):
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
    records = stored_records(results)
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


def test_partial_runs_say_so(data, cli, results):
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
        "--cache",
        "as-is",
        "--results",
        results,
        "-q",
    )
    assert r.code == 0, r.err
    (x,) = stored_records(results)
    assert x["partial"] is True and x["batches_per_epoch"] == 2 and x["samples_per_epoch"] == 2048
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
def test_bad_input_is_one_line(data, cli, results, args, fragments):
    r = cli("run", "--data-dir", data, "--results", results, "-q", *args)
    assert_one_line_error(r, *fragments)
    assert not results.exists()


def test_truncated_file_is_named(data, cli, results):
    (dataset_dir,) = [p for p in data.iterdir() if p.is_dir()]
    path = dataset_dir / "npy" / "labels.npy"
    original = path.read_bytes()
    try:
        path.write_bytes(original[:-8])
        r = cli("run", "--data-dir", data, "--format", "npy", "--device", "cpu", "-q", "--results", results)
        assert_one_line_error(r, "labels.npy", "truncated")
        path.unlink()
        r = cli("run", "--data-dir", data, "--format", "npy", "--device", "cpu", "-q", "--results", results)
        assert_one_line_error(r, "labels.npy", "missing")
    finally:
        path.write_bytes(original)


def test_no_dataset_prepares_a_small_default_one(tmp_path, cli, monkeypatch, results):
    import iobench.run.preparing

    monkeypatch.setattr(iobench.run.preparing, "DEFAULT_SIZE", 500)
    (tmp_path / "empty").mkdir()  # an existing, empty folder (a missing one is refused as a likely typo)
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
        results,
        "-q",
    )
    assert r.code == 0, r.err
    assert "no dataset n500_128_float32_c1000_s0" in r.err and "preparing it first (500 samples" in r.err
    assert (tmp_path / "empty" / "n500_128_float32_c1000_s0" / "manifest.json").is_file()


def test_run_measures_the_limits_once_and_reports_percent_of_limit(data, cli, tmp_path, monkeypatch):
    """Once per machine, whatever the results' folder: they were measured again for every new --results path."""
    import iobench.measuring.machine_limits
    from iobench.measuring.machine_limits import measure_limits

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = []

    def small_probe(data_dir, device, events, read_limit=None):
        calls.append(data_dir)
        return measure_limits(data_dir, device, 16 * 2**20, events=events, read_limit=read_limit)

    monkeypatch.setattr(iobench.measuring.machine_limits, "measure_limits", small_probe)
    for folder in ("fresh", "another"):
        results = tmp_path / folder / "r.jsonl"
        r = cli(
            "run", "--data-dir", data, "--format", "npy", "--device", "cpu", "--runs", "1", "-q", "--results", results
        )
        assert r.code == 0, r.err
    assert len(calls) == 1 and (tmp_path / "cache" / "iobench" / "limits.json").is_file()
    assert not (tmp_path / "fresh" / "limits.json").exists()
    records = stored_records(tmp_path / "fresh" / "r.jsonl") + stored_records(results)
    for x in records:
        # shuffled and warm: held to gathering samples of its size from memory, not a sequential copy
        assert x["limit_name"] == "memory_gather_mb_per_s" and x["limit_mb_per_s"] > 0
        assert x["percent_of_limit"] == pytest.approx(100 * x["mb_per_s"] / x["limit_mb_per_s"])


@pytest.mark.parametrize("step", ["mlp", "sleep:2"])
def test_steps_run_on_the_device_and_are_timed(data, cli, results, step):
    r = cli(
        "run",
        "--data-dir",
        data,
        "--format",
        "memmap",
        "--loader",
        "tensorclass",
        "--device",
        "cpu",
        "--runs",
        "1",
        "--step",
        step,
        "--results",
        results,
        "-q",
    )
    assert r.code == 0, r.err
    (x,) = stored_records(results)
    assert x["step"] == step and x["step_ms_per_batch"] > (1.5 if step == "sleep:2" else 0.0)


def test_mlp_step_learns():
    import torch

    from iobench.measuring.steps import make_step

    torch.manual_seed(0)
    features = torch.randn(256, 8)
    labels = (features[:, 0] > 0).long()
    step = make_step("mlp", 8, 2, torch.device("cpu"), seed=0)
    model_loss = torch.nn.CrossEntropyLoss()
    # One training step per call: repeated on a separable toy problem, the loss must fall.
    for _ in range(300):
        step((features, labels))
    assert model_loss(step.model(features), labels).item() < 0.5


@pytest.mark.long
def test_loader_all_on_the_cpu_leaves_gpu_resident_out_saying_so(data, cli, tmp_path):
    """`--loader all` on a CPU machine ran gpu-resident (the dataset held in RAM, npy 169,510 samples/s) as if it were
    a way from storage; named, it still runs."""
    common = [
        "run",
        "--data-dir",
        data,
        "--format",
        "npy",
        "--device",
        "cpu",
        "--runs",
        "1",
        "--max-batches",
        "2",
        "--results",
        tmp_path / "r.jsonl",
    ]
    r = cli(*common, "--loader", "all")
    assert r.code == 0, r.err
    assert "skipped gpu-resident: on the CPU it holds the dataset in RAM" in r.err
    assert "gpu-resident" not in {x["loader"] for x in stored_records(tmp_path / "r.jsonl")}
    assert cli(*common, "--loader", "gpu-resident").code == 0
    assert "gpu-resident" in {x["loader"] for x in stored_records(tmp_path / "r.jsonl")}


def test_prepare_shows_a_checksum_bar_only_for_an_amount_worth_one(tmp_path):
    """Prepare's progress said 'memmap checksum 334/334 bytes': the metadata files hashed after writing."""
    from iobench.data.prepare import WriteRequest, prepare
    from iobench.spec import DatasetSpec

    started = []

    class Seen:
        def start(self, key: str, description: str, total: int) -> None:
            started.append((description, total))

        def advance(self, key: str, n: int) -> None:
            pass

        def finish(self, key: str, description: str) -> None:
            pass

    prepare(WriteRequest.with_default_options(DatasetSpec(3000, shape=(4,)), tmp_path, ("memmap",)), Seen())
    assert not [(d, t) for d, t in started if "checksum" in d], started
