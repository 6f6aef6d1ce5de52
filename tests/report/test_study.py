"""Statistics and warnings, sweeps that resume, reports with plots, and compare."""

import pytest

from iobench.judge.warnings import Kind, record_warnings, series_warnings
from iobench.results.stats import summary
from tests.conftest import prepare_with_limits, record_of, stored_records

pytestmark = pytest.mark.e2e


def test_summary_and_warnings():
    s = summary([1.0, 2.0, 3.0, 100.0])
    assert s.median == 2.5 and s.min == 1.0 and s.max == 100.0 and s.mad == 1.0
    found = series_warnings("x", [2.0, 1.0, 1.0, 1.01, 1.0])
    assert [w.kind for w in found] == [Kind.SPREAD, Kind.OUTLIER, Kind.FIRST_SLOW]
    assert "#1 (2.000 s)" in found[1].finding and found[0].console().startswith("warning: x: epoch times vary by")
    assert series_warnings("x", [1.0, 1.01, 0.99]) == []


def test_record_warnings_are_made_once_and_formatted_twice():
    cold = record_of(cache="cold", residency_before=[0.0, 0.4], cold_not_cold=True, epoch_seconds=[1.0, 1.0])
    slow = record_of(world_size=2, backend="gloo", straggler_ratio=1.5, partial=True, epoch_seconds=[1.0, 1.0])
    found = record_warnings([cold, slow])
    assert [w.kind for w in found] == [Kind.NOT_COLD, Kind.STRAGGLER, Kind.PARTIAL]
    assert "40% of the dataset cached" in found[0].console()
    subject = "npy/dataloader warm shuffle ranks=2 bs=16 w=0 threads=None fetch=batch"
    assert found[1].markdown().startswith(f"- **warning** {subject}: the slowest of 2 ranks")
    assert found[2].console().startswith("note: ")


def test_a_pipeline_delivering_another_count_is_warned_and_a_cut_epoch_is_a_note():
    dropped = record_of(samples_per_epoch=96, partial=True, epoch_seconds=[1.0, 1.0])
    repeated = record_of(samples_per_epoch=104, epoch_seconds=[1.0, 1.0])
    cut = record_of(samples_per_epoch=32, partial=True, max_batches=2, epoch_seconds=[1.0, 1.0])
    found = record_warnings([dropped, repeated, cut])
    assert [w.kind for w in found] == [Kind.DELIVERY, Kind.DELIVERY, Kind.PARTIAL]
    assert "delivered 96 samples per epoch of the 100 the dataset holds (4 dropped" in found[0].finding
    assert "(4 repeated" in found[1].finding and found[1].severity == "warning"
    assert found[2].severity == "note"


def test_direct_cold_epochs_read_through_the_page_cache_are_flagged():
    threads, direct = "preadv threads through the page cache", "O_DIRECT + Linux AIO"
    flagged = record_of(loader="direct", cache="cold", read_method=threads, epoch_seconds=[1.0, 1.0])
    (warning,) = record_warnings([flagged])
    assert warning.kind is Kind.NOT_DIRECT and "not the storage reference" in warning.console()
    fine = [
        record_of(loader="direct", cache="cold", read_method=direct, epoch_seconds=[1.0, 1.0]),
        record_of(loader="direct", cache="warm", read_method=threads, epoch_seconds=[1.0, 1.0]),
        record_of(cache="cold", epoch_seconds=[1.0, 1.0]),  # other loaders record no method
    ]
    assert record_warnings(fine) == []


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    prepare_with_limits(root, "2000", "npy,memmap")
    return root


SWEEP = [
    "--format",
    "npy,memmap",
    "--loader",
    "dataloader,tensorclass",
    "--batch-size",
    "256,1024",
    "--runs",
    "2",
    "--device",
    "cpu",
    "-q",
]


@pytest.mark.long
def test_sweep_skips_what_does_not_go_together_and_resumes(workspace, cli, monkeypatch):
    import iobench.run.sweep

    results = workspace / "r.jsonl"
    real_run = iobench.run.sweep.run
    calls = []

    def interrupted_after_two(*args, **kwargs):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(args[0])
        return real_run(*args, **kwargs)

    monkeypatch.setattr(iobench.run.sweep, "run", interrupted_after_two)
    r = cli("sweep", "--data-dir", workspace / "data", "--results", results, *SWEEP)
    assert r.code == 130 and "skipped" in r.err and "6 to run" in r.err
    assert len(results.read_text().splitlines()) == 2
    monkeypatch.setattr(iobench.run.sweep, "run", real_run)
    r = cli("sweep", "--data-dir", workspace / "data", "--results", results, *SWEEP)
    assert r.code == 0 and "2 already in" in r.err and "4 to run" in r.err
    records = stored_records(results)
    keys = {(x["format"], x["loader"], x["batch_size"]) for x in records}
    assert len(records) == 6 == len(keys), "no configuration ran twice"
    r = cli("sweep", "--data-dir", workspace / "data", "--results", results, *SWEEP)
    assert r.code == 0 and "0 to run" in r.err
    cold_results = workspace / "cold.jsonl"  # a cold grid needs no warm-up: the default cache is not in the way
    cold = cli(
        "sweep",
        "--data-dir",
        workspace / "data",
        "--results",
        cold_results,
        "--format",
        "npy",
        "--loader",
        "dataloader",
        "--cache",
        "cold",
        "--warmup",
        "0",
        "--runs",
        "1",
        "--device",
        "cpu",
        "-q",
    )
    assert cold.code == 0, cold.err
    assert [(x["cache"], x["warmup"]) for x in stored_records(cold_results)] == [("cold", 0)]


def test_the_settings_presets_extra_rows_take_the_grids_cache_and_none_resident_from_object_storage():
    from iobench.plan.command_values import config_of
    from iobench.run.sweep import settings_extras
    from iobench.settings import LoaderSettings

    base = config_of(
        "memmap", "dataloader", LoaderSettings(), shuffle=True, block_size=0, epochs=1, warmup=1, runs=1, cache="as-is"
    )
    local = settings_extras(base, "npy", "warm")
    assert [(c.format, c.loader, c.cache) for c in local] == [
        ("npy", "dataloader", "warm"),
        ("npy", "gpu-resident", "warm"),
    ]
    assert local[0].settings.prefetch_thread == 4
    remote = settings_extras(base, "npy", "cold", remote=True)
    assert [(c.loader, c.cache) for c in remote] == [("dataloader", "cold")]


def test_a_failed_configuration_is_one_line_and_the_sweep_goes_on(workspace, cli, monkeypatch):
    """One library's error in a long grid loses neither the configurations after it nor their records; the sweep
    ends in one line naming the failure, and running it again runs only what failed."""
    import iobench.run.sweep
    from iobench.errors import IobenchError

    results = workspace / "failing.jsonl"
    real_run = iobench.run.sweep.run

    def second_fails(resolved, *args, **kwargs):
        if resolved.config.settings.batch_size == 64:
            raise IobenchError("features.npy: the library gave up")
        return real_run(resolved, *args, **kwargs)

    monkeypatch.setattr(iobench.run.sweep, "run", second_fails)
    args = (
        "sweep",
        "--data-dir",
        workspace / "data",
        "--results",
        results,
        "--format",
        "npy",
        "--loader",
        "dataloader",
        "--batch-size",
        "32,64,128",
        "--runs",
        "1",
        "--device",
        "cpu",
        "-q",
    )
    r = cli(*args)
    last = r.err.strip().splitlines()[-1]
    assert r.code == 2 and "Traceback" not in r.err and "(the 2 others were" in last
    assert last.startswith("iobench: error: 1 of 3 configuration(s) failed")
    assert "npy/dataloader warm bs=64 w=0" in r.err and "features.npy: the library gave up" in r.err
    assert "configuration 2 of 3 failed, going on" in r.err
    assert sorted(x["batch_size"] for x in stored_records(results)) == [32, 128]
    monkeypatch.setattr(iobench.run.sweep, "run", real_run)
    again = cli(*args)
    assert again.code == 0 and "2 already in" in again.err and "1 to run" in again.err
    assert sorted(x["batch_size"] for x in stored_records(results)) == [32, 64, 128]


def test_sweep_prepares_missing_sizes(workspace, cli):
    results = workspace / "sizes.jsonl"
    r = cli(
        "sweep",
        "--data-dir",
        workspace / "data",
        "--results",
        results,
        "--size",
        "300,600",
        "--format",
        "npy",
        "--loader",
        "dataloader",
        "--runs",
        "1",
        "--device",
        "cpu",
        "-q",
    )
    assert r.code == 0, r.err
    records = stored_records(results)
    assert sorted(x["n_samples"] for x in records) == [300, 600]


def test_a_grid_from_object_storage_skips_what_it_cannot_read_there_and_threads_go_with_the_dataloader():
    """Checked from the configurations alone, before a server starts: tensorclass reads no object storage, and
    --fetch-threads are the DataLoader's."""
    import torch

    from iobench.plan.command_values import config_of
    from iobench.run.sweep import expand
    from iobench.sessions.sweep import sweep_grid
    from iobench.settings import LoaderSettings

    base = config_of(
        "memmap", "dataloader", LoaderSettings(), shuffle=True, block_size=0, epochs=1, warmup=1, runs=1, cache="cold"
    )
    cpu = torch.device("cpu")
    grid, sizes = sweep_grid(
        None, base, cpu, True, format="memmap", loader="dataloader,tensorclass", fetch_threads="1,4"
    )
    local, _ = expand(base, grid, sizes, cpu)
    remote, notes = expand(base, grid, sizes, cpu, remote=True)
    pairs = [(p.config.loader, p.config.settings.fetch_threads) for p in local]
    assert pairs == [("dataloader", 1), ("dataloader", 4), ("tensorclass", 1)]
    assert [(p.config.loader, p.config.settings.fetch_threads) for p in remote] == pairs[:2]
    assert any("--remote reads memmap through --loader dataloader or nodes" in n for n in notes)
    default, _ = sweep_grid(None, base, cpu, True, format="webdataset")
    assert default["loader"] == ["dataloader", "native"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--preset", "nope"], "unknown preset"),
        (["--fetch-threads", "0"], "--fetch-threads must be >= 1"),
        (["--remote", "none", "--read-limit", "50"], "--read-limit and --cache-budget control local storage"),
        (["--latency-ms", "5"], "give --remote PROFILE too"),
        (["--warmup", "0"], "--cache warm (the default) needs --warmup >= 1"),
        (["--num-workers", "two"], "not a whole number"),
        (["--pin-memory", "maybe"], "not on or off"),
    ],
)
def test_sweep_bad_input(workspace, cli, args, message):
    r = cli("sweep", "--data-dir", workspace / "data", "--results", workspace / "bad.jsonl", "-q", *args)
    assert r.code == 2 and message in r.err


def test_report_and_compare(workspace, cli):
    results = workspace / "r.jsonl"
    if not results.exists():
        pytest.skip("needs the sweep test's results")
    out = workspace / "report"
    r = cli("report", results, "--out", out)
    assert r.code == 0, r.err
    text = (out / "report.md").read_text()
    assert "| format |" in text and "torch_version" in text and "![" in text
    for png in ("throughput.png", "split.png"):
        assert (out / png).stat().st_size > 1000 and f"]({png})" in text
    # % of the ceiling: drawn only when a run comes within 10% of its ceiling, and then linked
    assert (out / "limit.png").exists() == ("](limit.png)" in text)
    r = cli("compare", results, results)
    assert r.code == 0 and "6 matching configuration(s) (6 no decidable difference)" in r.out


def test_presets_expand_to_valid_configurations():
    import torch

    from iobench.plan.config import RunConfig
    from iobench.run.sweep import expand, preset

    cpu = torch.device("cpu")
    base = RunConfig(format="memmap")
    grid, sizes = preset("settings", cpu, "npy")
    points, notes = expand(base, grid, sizes, cpu)
    workers = sorted({p.config.settings.num_workers for p in points})
    assert workers == [0, 4, 8] and all(p.config.format == "npy" for p in points)
    assert all(not p.config.settings.pin_memory for p in points), "no pinning without CUDA"
    assert any("prefetch-factor" in n for n in notes), "prefetch factors without workers are skipped, and said"
    grid, sizes = preset("formats", cpu)
    points, _ = expand(base, grid, sizes, cpu)
    assert {p.config.cache for p in points} == {"cold", "warm"}
    assert ("memmap", "tensorclass") in {(p.config.format, p.config.loader) for p in points}
    assert ("lmdb", "tensorclass") not in {(p.config.format, p.config.loader) for p in points}
    assert preset("scaling", cpu)[1] == [10**5, 10**6, 10**7]


def test_settings_heatmap_and_scaling_plots(tmp_path):
    from iobench.report import plots

    def rec(workers, factor, n=1000):
        return record_of(num_workers=workers, prefetch_factor=factor, samples_per_s=1e5 + workers, n_samples=n)

    records = [rec(0, None), rec(4, 2), rec(4, 8), rec(8, 2)]
    assert plots.render("settings", records, tmp_path).stat().st_size > 1000
    assert plots.render("scaling", records, tmp_path) is None, "one size: nothing to plot"
    assert plots.render("scaling", records + [rec(0, None, 10**6)], tmp_path).stat().st_size > 1000
