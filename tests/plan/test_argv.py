"""`RunRequest.to_argv` (`plan.argv.configs_argv`): a request as `iobench run`'s arguments, what feed's ranks and
`run --nproc`'s run, parsed back by the command line into the same configurations and place, for every option of run
(a flag renamed breaks this test, not a feed run)."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from iobench.plan.config import Order, RunConfig
from iobench.plan.place import RunPlace
from iobench.plan.run_options import RUN, taken_by
from iobench.sessions.run import RunRequest
from iobench.settings import SETTINGS, LoaderSettings
from tests.conftest import skip_reason


def _parsed(cli, monkeypatch, argv: list[str]):
    """The Request `iobench run ARGV` hands its session (the session itself not run)."""
    import iobench.sessions.run as session

    asked = []

    def capture(request, events):
        asked.append(request)

    monkeypatch.setattr(session, "run_session", capture)
    r = cli(*argv)
    assert r.code == 0 and asked, r.err
    return asked[0]


def run_argv(config: RunConfig, place: RunPlace) -> list[str]:
    """One configuration's request as feed makes it: its format and loader named."""
    return RunRequest.of_one(config, place).to_argv()


BASE = RunConfig(format="npy")
CONFIGS = [
    BASE,
    replace(
        BASE,
        loader="dataloader",
        settings=LoaderSettings(batch_size=64, num_workers=2, persistent_workers=True, prefetch_factor=3),
        order=Order.SEQUENTIAL,
        epochs=3,
        warmup=2,
        runs=5,
        step="sleep:12.5",
        seed=7,
        max_batches=9,
        torch_threads=1,
    ),
    replace(BASE, order=Order.BLOCK, block_size=16, transform="cpu:5", resume_check=True, cache="as-is", warmup=0),
    replace(BASE, format="memmap", loader="tensorclass", settings=LoaderSettings(readahead_mb=8, non_blocking=False)),
]


@pytest.mark.parametrize("config", CONFIGS, ids=["defaults", "settings-and-timing", "options", "tensorclass"])
def test_a_configuration_survives_the_command_line(cli, monkeypatch, tmp_path, config):
    place = RunPlace(tmp_path / "data", "mine", "cpu", tmp_path / "r.jsonl")
    request = _parsed(cli, monkeypatch, run_argv(config, place))
    assert request.configs == (config,)
    assert (request.place.data_dir, request.place.dataset, request.place.device) == (
        Path(place.data_dir),
        "mine",
        "cpu",
    )
    assert request.place.results == place.results


def test_a_store_is_named_by_its_url_and_its_keys_stay_off_the_command_line(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a-secret")
    place = RunPlace(tmp_path / "data", "mine", "cpu", tmp_path / "r.jsonl", endpoint_url="http://127.0.0.1:9/b")
    argv = run_argv(CONFIGS[0], place)
    assert argv[argv.index("--endpoint-url") + 1] == "http://127.0.0.1:9/b"
    assert not any("a-secret" in a or "a-key-id" in a for a in argv)
    assert _parsed(cli, monkeypatch, argv).place.endpoint_url == "http://127.0.0.1:9/b"


def test_every_option_and_setting_is_written_where_it_differs():
    """Each loader setting and run option of `run` off its default appears in the arguments: none is left out."""
    argv = run_argv(CONFIGS[1], RunPlace(Path("d"), None, "cpu", Path("r.jsonl")))
    for name in ("batch_size", "num_workers", "persistent_workers", "prefetch_factor"):
        assert SETTINGS[name].option in argv
    assert {"--no-shuffle", "--epochs", "--warmup", "--runs", "--step", "--seed", "--max-batches"} <= set(argv)
    assert "--torch-threads" in argv and {o.option for o in taken_by(RUN)} >= {"--torch-threads"}


# `run` command lines that together give every option of `run` a value off its default (two places that exclude each
# other: iobench's store and the user's); each is parsed, written back by `RunRequest.to_argv` and parsed again
REQUESTS = [
    ("--format", "npy,files", "--loader", "dataloader,direct", "--format-option", "files.crop=center:8"),
    (
        "--format",
        "npy",
        *("--batch-size", "64", "--num-workers", "2", "--prefetch-factor", "3", "--no-pin-memory", "--blocking"),
        *("--persistent-workers", "--fetch", "item", "--fetch-threads", "2", "--prefetch-thread", "2"),
        *("--readahead-mb", "8", "--no-in-order", "--no-shuffle", "--epochs", "2", "--warmup", "0", "--runs", "4"),
        *("--until-decided", "2.5", "--max-batches", "9", "--max-seconds", "30", "--step", "sleep:12.5"),
        *("--min-au", "0.8", "--what-if", "5,10.5", "--seed", "7", "--cache", "as-is", "--eviction", "fadvise"),
        *("--read-limit", "50", "--cache-budget", "1G", "--transform", "cpu:5", "--torch-threads", "1"),
        *("--cpu-contention", "1", "--resume-check", "--distributed-sampler", "pad", "--profile"),
        *("--rank-timeout", "60", "--wide", "--quiet", "--size", "300", "--device", "cpu"),
    ),
    (
        *("--format", "npy", "--remote", "s3-like", "--latency-ms", "5", "--connection-mb-per-s", "100"),
        *("--block-shuffle", "16", "--format-option", "npy.remote_in_flight=4", "--transform-on", "device"),
        *("--dataset", "mine"),
    ),
    (
        "--format",
        "files",
        "--decode-on",
        "device",
        "--fuse-chunk",
        "8M",
        "--fuse-read-ahead",
        "16M",
        "--remote",
        "s3-like",
    ),
    ("--format", "npy", "--endpoint-url", "http://127.0.0.1:9/b"),
]
# --loader ray is refused where Ray is not installed (the README's test command has no Ray): its option, apart
RAY_REQUEST = ("--format", "npy", "--loader", "ray", "--num-workers", "2", "--ray-address", "127.0.0.1:6379")
RAY = importlib.util.find_spec("ray") is not None
NOT_PASSED_ON = {
    "--nproc": "the ranks' launch: they run without it",
    "--dataset-factory": "a session of its own (`iobench.cli.dataset_factory`)",
    "--help": "not a value",
}


def _round_trip(cli, monkeypatch, tmp_path, argv: tuple[str, ...]) -> list[str]:
    """`RunRequest.to_argv`, what `run --nproc` starts each rank with, of `run ARGV`: parsed back into the same
    request."""
    request = _parsed(cli, monkeypatch, ["run", *argv, "--data-dir", str(tmp_path), "--results", str(tmp_path / "r")])
    written = request.to_argv()
    assert _parsed(cli, monkeypatch, written) == request
    return written


@pytest.mark.parametrize(
    "argv",
    [*REQUESTS, pytest.param(RAY_REQUEST, marks=pytest.mark.skipif(not RAY, reason=skip_reason("ray")))],
    ids=[*map(str, range(len(REQUESTS))), "ray"],
)
def test_a_run_request_survives_its_own_arguments(cli, monkeypatch, tmp_path, argv):
    _round_trip(cli, monkeypatch, tmp_path, argv)


def test_every_option_of_run_is_passed_on_by_a_request(cli, monkeypatch, tmp_path):
    """Each option of `run` (but those `NOT_PASSED_ON` says why) is written by `RunRequest.to_argv` in one of the
    round-trip cases: a new option that a rank would not be given fails here."""
    import typer

    from iobench.cli.app import app

    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    cases = [*REQUESTS, RAY_REQUEST] if RAY else REQUESTS
    written = {a for argv in cases for a in _round_trip(cli, monkeypatch, tmp_path, argv) if a.startswith("--")}
    excused = {*NOT_PASSED_ON, *(() if RAY else ("--ray-address",))}
    for param in run.params:
        flags = {*param.opts, *getattr(param, "secondary_opts", ())} - {"-q"}
        assert flags & written or flags & excused, f"no round-trip case writes {param.opts[0]}"


def test_configurations_no_one_command_line_gives_are_refused():
    """Configurations that differ beyond format and loader (a sweep's grid) are not one `run` command: refused, not
    written as the first one's."""
    from iobench.plan.argv import configs_argv

    place = RunPlace(Path("d"), None, "cpu", Path("r.jsonl"))
    other = replace(BASE, settings=LoaderSettings(batch_size=64))
    with pytest.raises(ValueError, match="not one `run` command"):
        configs_argv((BASE, other), place, "npy", None)
    assert configs_argv((BASE, replace(BASE, format="memmap")), place, "npy,memmap", None)[:3] == [
        "run",
        "--format",
        "npy,memmap",
    ]
