"""Shared helpers: tiny datasets and a CLI runner that captures output and the exit code."""

from __future__ import annotations

import os
from typing import Any

# Console text is checked at one width whatever the terminal: the CLI's consoles read COLUMNS when they are made
# (at the first import of iobench.cli), and every subprocess a test starts inherits it
os.environ["COLUMNS"] = "200"

import importlib.util  # noqa: E402
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from iobench import spec
from iobench.cli import main
from iobench.plan.config import RunConfig, order_of
from iobench.plan.resolve import ResolvedRun, RunTarget, resolve
from iobench.results.record import RunRecord
from iobench.results.store import read_records
from iobench.settings import LoaderSettings
from iobench.system.world import SINGLE, World

ROOT = Path(__file__).resolve().parents[1]


def pyproject() -> dict:
    """The repository's pyproject.toml, parsed (skipped where Python is older than 3.11's tomllib: pyproject allows
    3.10)."""
    try:
        import tomllib
    except ImportError:
        pytest.skip("reading pyproject.toml needs Python 3.11's tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


# The user's cache (limits measured once per machine) is the test session's own, never ~/.cache: tests that measure
# limits on purpose give each test one of its own (monkeypatch.setenv("XDG_CACHE_HOME", ...)).
if "IOBENCH_TEST_CACHE" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["IOBENCH_TEST_CACHE"] = os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="iobench-test-cache-")
    atexit.register(shutil.rmtree, os.environ["IOBENCH_TEST_CACHE"], True)  # made by this session: gone with it


SMALL_BYTES = 32 * 2**20  # what a test's folder may hold unless the test is marked slow


@pytest.fixture(autouse=True)
def _small_unless_slow(request):
    """A test's folder stays small unless the test says it is slow (the suite left 3.3 GB in the temp folder, 466 MB
    datasets in unmarked tests): measured as the test ends, before pytest removes the folder."""
    folder = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if folder is not None and (why := too_big(folder, request.node.get_closest_marker("slow") is not None)):
        pytest.fail(f"{request.node.nodeid} {why}", pytrace=False)


def too_big(folder: Path, slow: bool) -> str | None:
    """Why a test's folder is too large for an unmarked test; None if it is not (or the test is marked slow)."""
    if slow:
        return None
    # the disk it takes (a sparse file of 40 GB holds no blocks)
    held = sum(f.stat().st_blocks * 512 for f in folder.rglob("*") if f.is_file() and not f.is_symlink())
    return (
        f"left {held / 2**20:.0f} MiB in its folder: shrink its data, or mark it @pytest.mark.slow"
        if (held > SMALL_BYTES)
        else None
    )


# Where iobench measures the cores other programs use (each imports `other_cores_busy` by name);
# tests/system/test_contention_sites.py keeps this list whole.
MEASURES_OTHER_CORES = (
    "iobench.checkpoint.run_trials",
    "iobench.run.dataset_factory",
    "iobench.sessions.doctor",
    "iobench.run.runner",
    "iobench.run.user_measure",
    "iobench.sessions.run",
    "iobench.sessions.checkpoint_workload",
)


@pytest.fixture
def quiet_machine(monkeypatch):
    """The runs take the machine as quiet whatever else it runs: beside other programs an answer names no
    configuration (tests/report/test_answer.py), so a test of what an answer names holds on a busy CI machine only
    this way (two `yes` loops failed two such tests)."""
    import importlib

    for name in MEASURES_OTHER_CORES:
        monkeypatch.setattr(importlib.import_module(name), "other_cores_busy", lambda *args, **kwargs: 0.0)
    # what the runs' own waits read of the machine (`iobench.system.waits`): other programs' cores not known
    monkeypatch.setattr(importlib.import_module("iobench.system.waits"), "machine_busy_s", lambda: None)


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys):
    """Run `iobench ARGS...` in this process."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def invoke(*args) -> None:
    """Run `iobench ARGS...` in this process for a fixture's setup; it must succeed."""
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in args])
    assert info.value.code == 0, args


def prepare_with_limits(root: Path, size: str, formats: str) -> None:
    """A tiny dataset in root/data, and limits.json measured with a small probe beside root/*.jsonl."""
    invoke("prepare", "--size", size, "--data-dir", root / "data", "-q", "--formats", formats)
    invoke("limits", "--data-dir", root / "data", "--results", root / "r.jsonl", "--probe-size", "16M")


def run_subprocess(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "iobench", *map(str, args)], capture_output=True, text=True, env=env, cwd=ROOT, **kwargs
    )


def descendants(pid: int) -> set[int]:
    """Every process below pid (DataLoader workers, a cache governor), from /proc."""
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for task in os.listdir(f"/proc/{p}/task") if os.path.isdir(f"/proc/{p}/task") else []:
            try:
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids = {int(x) for x in f.read().split()}
            except OSError:
                continue
            todo += list(kids - found)
            found |= kids
    return found


@pytest.fixture
def small_chunks(monkeypatch):
    """Generation chunks of 4 KiB, so tiny datasets still cross many chunk boundaries."""
    monkeypatch.setattr(spec, "GENERATION_CHUNK_BYTES", 4096)


def assert_one_line_error(result: CliResult, *fragments: str) -> None:
    assert result.code == 2, (result.code, result.out, result.err)
    lines = [line for line in result.err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith("iobench: error:"), lines[0]
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def assert_last_line_error(result: CliResult, *fragments: str) -> None:
    """A command that said what it was doing, then failed in one line: its last line, no traceback."""
    assert result.code == 2, (result.code, result.out, result.err)
    lines = [line for line in result.err.strip().splitlines() if line.strip()]
    assert lines and lines[-1].startswith("iobench: error:"), result.err
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in lines[-1], (fragment, lines[-1])


def stored_records(path: Path) -> list[dict]:
    """The records of a results file as the flat objects stored on disk (read through the typed reader)."""
    return [r.to_json() for r in read_records(path)]


def run_config(fmt: str, loader: str, *, shuffle: bool = True, block_size: int = 0, **kw) -> RunConfig:
    """A RunConfig from flat keywords (loader settings among them), as the command line gives them."""
    settings = {k: kw.pop(k) for k in list(kw) if k in LoaderSettings.__dataclass_fields__}
    settings.setdefault("batch_size", 16)
    return RunConfig(
        format=fmt,
        loader=loader,
        settings=LoaderSettings(**settings),
        order=order_of(shuffle, block_size),
        block_size=block_size,
        **kw,
    )


def resolved_run(dataset_dir: Path, fmt: str, loader: str, world: World = SINGLE, **kw) -> ResolvedRun:
    """run_config(...) resolved against a dataset on the CPU."""
    return resolve(run_config(fmt, loader, **kw), RunTarget(dataset_dir, torch.device("cpu")), world)


# A complete stored record of schema 1 (no schema_version): what tests vary one field at a time.
FLAT_RECORD = {
    "dataset": "n100_3-4_float32_c1000_s0",
    "format": "npy",
    "loader": "dataloader",
    "batch_size": 16,
    "num_workers": 0,
    "order": "shuffle",
    "shuffle": True,
    "epochs": 1,
    "warmup": 1,
    "runs": 3,
    "device": "cpu",
    "cache": "warm",
    "n_samples": 100,
    "sample_shape": [3, 4],
    "dtype": "float32",
    "sample_bytes": 56,
    "dataset_bytes": 5600,
    "epoch_seconds": [0.1, 0.2, 0.3],
    "epoch_seconds_median": 0.2,
    "epoch_seconds_min": 0.1,
    "epoch_seconds_max": 0.3,
    "epoch_seconds_cv": 0.4,
    "epoch_seconds_mad": 0.1,
    "first_batch_seconds": [0.01, 0.01, 0.01],
    "first_batch_seconds_median": 0.01,
    "samples_per_epoch": 100,
    "batches_per_epoch": 7,
    "samples_per_s": 500.0,
    "mb_per_s": 0.028,
    "wait_ms_per_batch": 1.0,
    "h2d_ms_per_batch": 0.1,
    "step_ms_per_batch": 0.0,
    "partial": False,
}


def record_of(**changes) -> RunRecord:
    return RunRecord.from_json({**FLAT_RECORD, **changes})


def format_param(name: str, *values: object) -> object:
    """A test parameter over a format: skipped, with the extra to install, when its library is missing."""
    from iobench.formats import FORMATS

    entry = FORMATS._entries[name]
    missing = not FORMATS.installed(name)
    reason = f"{entry.needs} is not installed (pip install 'iobench[{entry.needs}]')" if missing else ""
    return pytest.param(
        name, *values, marks=pytest.mark.skipif(missing, reason=reason), id="-".join([name, *(str(v) for v in values)])
    )


# --loader nodes and tune's threads need torchdata (the `[torchdata]` extra): skipped with the reason without it
NEEDS_TORCHDATA = pytest.mark.skipif(
    importlib.util.find_spec("torchdata") is None,
    reason="torchdata is not installed (pip install 'iobench[torchdata]')",
)
NEEDS_SPDL = pytest.mark.skipif(
    importlib.util.find_spec("spdl") is None, reason="spdl is not installed (pip install 'iobench[spdl]')"
)


# The extra that installs a module a test needs: every skip says it the same way (`needs_module`)
EXTRA_OF = {"obstore": "remote", "pylance": "lance", "lance": "lance", "safetensors": "checkpoint"}


def skip_reason(module: str) -> str:
    """The one wording of a skip for a missing module: the module and the extra that installs it."""
    return f"{module} is not installed (pip install 'iobench[{EXTRA_OF.get(module, module)}]')"


def needs_module(module: str) -> Any:
    """The module, or the test skipped with `skip_reason`."""
    return pytest.importorskip(module, reason=skip_reason(module))


def every_format() -> list[object]:
    from iobench.formats import FORMATS

    return [format_param(name) for name in sorted(FORMATS)]


def run_pasted(script: Path, start_method: str) -> subprocess.CompletedProcess:
    """The pasted script in a fresh interpreter whose workers start with `start_method` (spawn pickles the
    dataset and the collate function: a lambda there fails), from outside the checkout."""
    code = (
        f"import multiprocessing, runpy; multiprocessing.set_start_method({start_method!r}); "
        f"runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=script.parent, env=env)


def assert_formatted(script: Path) -> None:
    """What tune pastes passes `ruff format` as it is, with ruff's defaults (a user's project has its own settings,
    or none: `--isolated` reads no configuration, neither this project's nor the working directory's), where ruff is
    installed (the test extra installs it)."""
    import importlib.util

    if importlib.util.find_spec("ruff") is not None:
        command = [sys.executable, "-m", "ruff", "format", "--isolated", "--check", "--diff", str(script)]
        checked = subprocess.run(command, capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr


_PEAK = """import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stdout.write(done.stdout); sys.stderr.write(done.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=sys.stderr)
sys.exit(done.returncode)
"""


def run_with_peak_memory(*args: object, timeout: float = 300) -> tuple[CliResult, int]:
    """`iobench ARGS...` in a process of its own; its result and the peak RSS in bytes of it and its children
    (a fresh parent between, so that no earlier child of the test session counts)."""
    env = dict(os.environ, COLUMNS="200")
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, sys.executable, "-m", "iobench", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )
    *err, peak = done.stderr.rstrip("\n").split("\n")
    return CliResult(done.returncode, done.stdout, "\n".join(err) + "\n" if err else ""), int(peak)


def planted(folder: Path) -> Path:
    """A working directory holding an `iobench` package (with `iobench.data.shares`) and a `numpy` module that
    each leave a line in the returned marker file when imported: a child process that imports from the working
    directory instead of the iobench that is running would run them."""
    marker = folder / "planted-code-ran"
    leave = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    (folder / "iobench" / "data").mkdir(parents=True)
    for module in (
        "iobench/__init__.py",
        "iobench/__main__.py",
        "iobench/data/__init__.py",
        "iobench/data/shares.py",
        "numpy.py",
    ):
        (folder / module).write_text(leave)
    return marker


def console_script() -> Path:
    """The `iobench` command installed beside this interpreter: how a user starts it (not `python -m`, which
    would itself put the working directory first)."""
    script = Path(sys.executable).with_name("iobench")
    if not script.is_file():
        pytest.skip(f"no iobench console script beside {sys.executable}")
    return script


class ScriptedStorage:
    """A storage that is not the machine's: cold, residency, what moved and its controls are scripted and
    counted, while the files are read from a real storage's folder. A run driven through it shows the runner
    asks the storage, and nothing else, about all of them."""

    def __new__(cls, real):
        from contextlib import contextmanager

        from iobench.storage import Applied, Counters, Storage

        class Moved(Counters):
            def __init__(self) -> None:
                self.count = 0

            def snapshot(self, pids=()):
                self.count += 1
                return self.count * 1000

            def delta(self, a, b):
                return {"data_block_device": "scripted0", "device_read_bytes": b - a, "process_read_bytes": 7}

        class Scripted(Storage):
            kind = "scripted"

            def __init__(self) -> None:
                self.real, self.made_cold, self.controlled = real, 0, 0

            @property
            def where(self):
                return f"scripted:{real.where}"

            def files(self):
                return real.files()

            def local_folder(self):
                return real.local_folder()

            def make_cold(self):
                self.made_cold += 1
                return "scripted"

            def residency(self):
                return 0.25

            def counters(self):
                return Moved()

            @contextmanager
            def controls(self):
                self.controlled += 1
                yield Applied(method="scripted controls")

        return Scripted()


def run_beside_a_fifo(resolved: ResolvedRun, fifo: Path) -> BaseException | None:
    """`fifo` (one of the run's data files) swapped for a FIFO after every check passed, then the run, in a thread
    given 60 s: what it raised (None if nothing). A run that waits on the FIFO fails the test, after a writer end
    has let its blocked open() return."""
    import threading

    from iobench.run.runner import run

    fifo.unlink()
    os.mkfifo(fifo)
    outcome: dict[str, BaseException] = {}

    def measure() -> None:
        try:
            run(resolved)
        except BaseException as exc:  # the caller examines it
            outcome["error"] = exc

    thread = threading.Thread(target=measure, daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_RDWR))
        pytest.fail(f"{resolved.config.label} waited on a FIFO")
    return outcome.get("error")
