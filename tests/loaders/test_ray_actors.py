"""The Ray loader: actors on a local Ray instance deliver the exact dataset (skipped without Ray)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from iobench.data.manifest import Manifest
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.loaders import LOADERS, LoaderName, ray_cluster
from iobench.loaders.base import LoaderContext
from iobench.loaders.order import indices_of
from iobench.measuring.clocks import time_epoch
from iobench.plan.resolve import check_world
from iobench.plan.selection import parse_pairs
from iobench.run.building import build_loader
from iobench.settings import LoaderSettings
from iobench.system.processes import parent_of, process_alive
from iobench.system.world import World
from tests.conftest import format_param, invoke, needs_module, resolved_run, run_config, stored_records

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

N = 203
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def ray():
    ray = needs_module("ray")
    yield ray
    ray_cluster.shutdown()  # Ray, and iobench's guard of its local instance (it had lived to the session's end)


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray")
    invoke("prepare", "--size", N, "--shape", "3,4", "--data-dir", root, "-q", "--formats", "all")
    (d,) = root.iterdir()
    return d


def _config(dataset_dir, fmt, **kw):
    return resolved_run(dataset_dir, fmt, "ray", num_workers=2, **kw)


@pytest.mark.parametrize("fmt, shuffle", [format_param(f, True) for f in FORMATS] + [format_param("memmap", False)])
def test_ray_actors_deliver_the_exact_dataset(ray, dataset_dir, fmt, shuffle):
    manifest = Manifest.load(dataset_dir)
    reader = FORMATS["npy"].reader(dataset_dir / "npy", manifest.spec, None)
    features, labels = reader.read_range(0, N)
    reader.close()
    loader = build_loader(_config(dataset_dir, fmt, shuffle=shuffle))
    pids = list(loader.local_pids)
    try:
        assert len(loader.actors) == 2 and len(pids) == 2 and loader.setup_seconds() > 0
        for epoch in (0, 1):
            arrived = []
            timing = time_epoch(loader, epoch, lambda b, got=arrived: got.append((b[0].clone(), b[1].clone())))
            expected = np.concatenate([indices_of(w) for w in loader.order.batches(epoch)])
            assert timing.samples == N and timing.batches == loader.order.n_batches()
            got_features = torch.cat([f for f, _ in arrived]).numpy()
            got_labels = torch.cat([lb for _, lb in arrived]).numpy()
            assert np.array_equal(got_features, features[expected])
            assert np.array_equal(got_labels, labels[expected])
            assert sorted(expected.tolist()) == list(range(N))
    finally:
        loader.close()
    assert loader.actors == []
    assert not any(process_alive(pid) for pid in pids)  # nothing maps the files once close() returns


def test_ray_run_writes_a_record(ray, dataset_dir, cli, tmp_path):
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--loader",
        "ray",
        "--format",
        "npy",
        "--num-workers",
        "2",
        "--device",
        "cpu",
        "--runs",
        "2",
        "--data-dir",
        dataset_dir.parent,
        "--results",
        results,
        "--cache",
        "cold",
        "-q",
    )
    assert r.code == 0, r.err
    (record,) = stored_records(results)
    assert record["loader"] == "ray" and record["num_workers"] == 2 and record["ray_address"] is None
    assert record["samples_per_epoch"] == N and record["residency_before"] == [0.0, 0.0]
    for read in record["process_read_bytes"]:  # the actors read the evicted files, and are counted
        assert read >= 0.9 * record["dataset_bytes"], (read, record["dataset_bytes"])


def test_shutdown_ends_the_local_instance_its_guard_and_its_folder_and_a_later_loader_starts_afresh(ray):
    """A process that goes on after its Ray loaders (this test session: another test's check found the guard alive)
    ends iobench's local instance with `ray_cluster.shutdown()`, not only at exit."""
    from iobench.system.reaper import descendants

    ray_cluster.shutdown()  # an instance of the module's earlier tests
    for _ in range(2):  # the second: a fresh instance after the first was shut down
        before = set(descendants(os.getpid()))  # another module's server may be running in this session
        ray_cluster.connect(None)
        started, folder = set(descendants(os.getpid())) - before, ray_cluster._Local.folder
        assert started and folder is not None and folder.is_dir()
        ray_cluster.shutdown()
        assert not ray.is_initialized() and not folder.exists()
        assert not [pid for pid in started if process_alive(pid)], "a process Ray or its guard started is alive"


def test_ray_refusals(ray):
    with pytest.raises(IobenchError, match="number of Ray actors"):
        run_config("npy", "ray", num_workers=0)
    with pytest.raises(IobenchError, match="--loader dataloader does not take --ray-address"):
        run_config("npy", "dataloader", ray_address="auto")
    config = run_config("npy", "ray", num_workers=1)
    with pytest.raises(IobenchError, match="without torchrun"):
        check_world(config, N, World(rank=0, size=2, backend="gloo"))


def test_without_ray_the_loader_is_refused_in_one_line(monkeypatch):
    """What a fresh install (the README's command, no extras) says; Ray made absent when it is there."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(IobenchError, match=r"--loader ray needs Ray: pip install 'iobench\[ray\]'"):
        run_config("npy", "ray", num_workers=1)


def test_all_loaders_leave_ray_out_unless_named():
    """Named, it is taken where Ray is installed and refused in one line where it is not."""
    pairs, _ = parse_pairs("npy", "all")
    assert ("npy", "ray") not in pairs and ("npy", "dataloader") in pairs
    if not LOADERS[LoaderName.RAY].installed:
        with pytest.raises(IobenchError, match=r"pip install 'iobench\[ray\]'"):
            parse_pairs("npy", "all,ray")
        return
    pairs, _ = parse_pairs("npy", "all,ray")
    assert ("npy", "ray") in pairs


def test_a_failing_actor_ends_the_epoch_with_one_line(ray, tmp_path):
    from iobench.errors import RunFailed
    from iobench.loaders.order import EpochOrder
    from iobench.loaders.ray_actors import RayLoader
    from iobench.run.format_epochs import ConfigEpochs
    from iobench.spec import DatasetSpec

    reader = FORMATS["npy"].reader(tmp_path / "missing", DatasetSpec(100), None)
    loader = RayLoader(
        LoaderContext(reader, EpochOrder(100, 10), LoaderSettings(num_workers=1), CPU, format_name="npy")
    )
    config = run_config("npy", "ray", num_workers=1)
    try:
        with pytest.raises(RunFailed, match="a Ray actor failed: FileNotFoundError"):
            ConfigEpochs(config).clock(loader, 0, lambda b: None)
    finally:
        loader.close()


@pytest.mark.parametrize("fmt, shuffle, in_order", [("npy", True, True), ("files", False, True), ("lmdb", True, False)])
def test_ray_data_delivers_the_exact_dataset_and_says_in_which_order(ray, dataset_dir, fmt, shuffle, in_order):
    """map_batches on an actor pool, iter_torch_batches: every sample once with its values; in order, the run's
    order; out of order, the order it carried (what the shuffle score reads)."""
    manifest = Manifest.load(dataset_dir)
    reader = FORMATS["npy"].reader(dataset_dir / "npy", manifest.spec, None)
    features, labels = reader.read_range(0, N)
    reader.close()
    loader = build_loader(resolved_run(dataset_dir, fmt, "ray-data", num_workers=2, shuffle=shuffle, in_order=in_order))
    try:
        for epoch in (0, 1):
            arrived = []
            timing = time_epoch(loader, epoch, lambda b, got=arrived: got.append((b[0].clone(), b[1].clone())))
            assert timing.samples == N and timing.batches == loader.order.n_batches()
            delivered = loader.delivered(epoch, N)
            assert sorted(delivered.tolist()) == list(range(N))
            planned = np.concatenate([indices_of(w) for w in loader.order.batches(epoch)])
            if in_order:
                np.testing.assert_array_equal(delivered, planned)
            assert np.array_equal(torch.cat([f for f, _ in arrived]).numpy(), features[delivered])
            assert np.array_equal(torch.cat([lb for _, lb in arrived]).numpy(), labels[delivered])
            assert sorted(len(lb) for _, lb in arrived) == [N % 16] + [16] * (N // 16)
        pids = list(loader._pids)
        assert pids, "the actors that read were counted"
    finally:
        loader.close()
    assert not any(process_alive(pid) for pid in pids), "an actor outlived close()"


def test_ray_data_run_writes_a_record_naming_ray(ray, dataset_dir, cli, tmp_path):
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--loader",
        "ray-data",
        "--format",
        "npy",
        "--num-workers",
        "1",
        "--device",
        "cpu",
        "--runs",
        "1",
        "--data-dir",
        dataset_dir.parent,
        "--results",
        results,
        "-q",
    )
    assert r.code == 0, r.err
    assert "Traceback" not in r.err and "WARNING" not in r.err, r.err
    (record,) = stored_records(results)
    assert record["loader"] == "ray-data" and record["samples_per_epoch"] == N
    assert record["packages"]["ray"] == ray.__version__


def test_ray_data_refusals(ray):
    with pytest.raises(IobenchError, match="size of its actor pool"):
        run_config("npy", "ray-data", num_workers=0)
    with pytest.raises(IobenchError, match="--loader ray-data does not take --prefetch-thread"):
        run_config("npy", "ray-data", num_workers=1, prefetch_thread=2)
    with pytest.raises(IobenchError, match="--loader ray-data is one training process"):
        check_world(run_config("npy", "ray-data", num_workers=1), N, World(rank=0, size=2, backend="gloo"))


def _listening(pids: set[int]) -> list[str]:
    """The local addresses the processes listen on (TCP, IPv4 and IPv6), from /proc/net/tcp*, matched to the
    processes' sockets by inode."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append(fields[1])
    return found


# 127.0.0.1, ::1 and ::ffff:127.0.0.1 as /proc/net writes them
LOOPBACK = ("0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F")


def _cmdline(pid: int) -> bytes:
    """A process's command line; empty for one that ended between being listed and being read (Ray starts and ends
    many while it comes up)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _endless_run(dataset_dir, tmp_path, loader: str, workers: int):
    """`iobench run` with a local Ray instance until it is signalled (SIGINT as a terminal gives it)."""
    import signal
    import subprocess
    import sys

    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "iobench",
            "run",
            "--format",
            "npy",
            "--loader",
            loader,
            "--num-workers",
            str(workers),
            "--runs",
            "100000",
            "--data-dir",
            str(dataset_dir.parent),
            "--results",
            str(tmp_path / "r.jsonl"),
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for_descendant(proc, marker: bytes, timeout_s: float = 120) -> None:
    """Until a process below `proc` has `marker` in its command line (the run still going)."""
    import time

    from iobench.system.reaper import descendants

    deadline = time.monotonic() + timeout_s
    while not any(marker in _cmdline(p) for p in descendants(proc.pid) if process_alive(p)):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"no {marker!r} process after {timeout_s} s"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGKILL"])
def test_a_ray_instance_iobench_starts_listens_on_loopback_and_leaves_nothing(dataset_dir, tmp_path, sig):
    """`ray.init()` with no address made raylet, gcs_server, the workers and the driver listen on every interface;
    /tmp/ray was left behind, 0777, and ~/.ray/auth_token 0644; after SIGINT or SIGKILL `ray::DashboardAgent` and
    `ray::RuntimeEnvAgent` lived on for more than a minute, reparented to init."""
    import signal
    import tempfile
    import time

    from iobench.system.processes import start_time
    from iobench.system.reaper import descendants

    needs_module("ray")
    state = os.path.join(tempfile.gettempdir(), f"iobench-{os.geteuid()}")
    proc = _endless_run(dataset_dir, tmp_path, "ray", 2)
    try:
        _wait_for_descendant(proc, b"BatchReader")
        tree = {pid: start_time(pid) for pid in [proc.pid, *descendants(proc.pid)]}
        folders = [n for n in os.listdir(state) if n.startswith(f"ray-{proc.pid}-")]
        listening = _listening(set(tree))
        assert listening and all(a.split(":")[0] in LOOPBACK for a in listening), listening
        # Ray makes its temp folders 0777 itself (try_to_create_directory), some moments after start: what keeps
        # other users out is iobench's state folder around it, 0700 and ours
        assert len(folders) == 1 and os.stat(state).st_mode & 0o777 == 0o700 and os.stat(state).st_uid == os.geteuid()
    finally:
        proc.send_signal(getattr(signal, sig))
        proc.communicate(timeout=60)
    if sig == "SIGINT":
        assert proc.returncode == 130
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        left = [p for p, t in tree.items() if process_alive(p) and start_time(p) == t]
        if not left and not os.path.exists(os.path.join(state, folders[0])):
            break
        time.sleep(0.2)
    assert not left, [open(f"/proc/{p}/cmdline", "rb").read()[:80] for p in left]
    assert not os.path.exists(os.path.join(state, folders[0]))


def _orphans_naming_ray() -> set[int]:
    """Processes of ours reparented to init whose command line names Ray (its servers, `ray::` agents)."""
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            pid = int(entry.name)
            try:
                ours = os.stat(f"/proc/{pid}").st_uid == os.geteuid()
            except OSError:
                continue
            if parent_of(pid) == 1 and ours and process_alive(pid) and b"ray" in _cmdline(pid):
                found.add(pid)
    return found


def test_ctrl_c_while_ray_starts_leaves_nothing(dataset_dir, tmp_path):
    """Interrupted inside `ray.init` (the crash matrix's SIGINT at 4-6 s), the driver had named nothing to the
    guard yet: `ray::DashboardAgent` and `ray::RuntimeEnvAgent` outlived it, reparented to init."""
    import signal
    import time

    needs_module("ray")
    before = _orphans_naming_ray()
    proc = _endless_run(dataset_dir, tmp_path, "ray-data", 1)
    try:
        _wait_for_descendant(proc, b"ray::DashboardAgent")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    deadline = time.monotonic() + 15
    while (left := _orphans_naming_ray() - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, [_cmdline(p).rstrip(b"\0")[:80] for p in left]


@pytest.mark.parametrize("sig", ["SIGINT", "SIGKILL"])
def test_the_users_processes_that_name_the_runs_ray_folder_outlive_the_run(dataset_dir, tmp_path, sig):
    """S4: during a Ray run the user started `env RAY_AUTH_TOKEN_PATH=F/auth_token sleep` and `tail -f
    F/auth_token` (F: the run's Ray folder); Ctrl-C or SIGKILL to iobench ended both. They are not iobench's."""
    import signal
    import subprocess
    import tempfile
    import time

    from iobench.system.processes import start_time

    needs_module("ray")
    state = os.path.join(tempfile.gettempdir(), f"iobench-{os.geteuid()}")
    proc = _endless_run(dataset_dir, tmp_path, "ray", 1)
    bystanders = []
    try:
        _wait_for_descendant(proc, b"BatchReader")
        (folder,) = [os.path.join(state, n) for n in os.listdir(state) if n.startswith(f"ray-{proc.pid}-")]
        token = os.path.join(folder, "auth_token")
        for argv, env in (
            (["sleep", "300"], {**os.environ, "RAY_AUTH_TOKEN_PATH": token}),
            (["tail", "-f", token], dict(os.environ)),
        ):
            p = subprocess.Popen(
                argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
            )
            bystanders.append((p, start_time(p.pid)))
    finally:
        proc.send_signal(getattr(signal, sig))
        proc.communicate(timeout=60)
    try:
        time.sleep(6)  # the guard's SIGTERM, wait and SIGKILL are over by now
        assert all(p.poll() is None and start_time(p.pid) == t for p, t in bystanders)
    finally:
        for p, _ in bystanders:
            p.kill()
            p.wait()


@pytest.mark.parametrize("given", ["option", "environment"])
def test_a_ray_cluster_that_does_not_answer_is_one_line_naming_the_address_and_where_it_came_from(
    dataset_dir, tmp_path, given
):
    """C2: `--ray-address 127.0.0.1:6390` against the user's loopback cluster hung for 200 s of Ray's C++ warnings
    (Ray turned it into the node's address); with `RAY_ADDRESS` set and no option the error named a local instance."""
    import socket
    import subprocess
    import sys
    import time

    needs_module("ray")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    args = ["--ray-address", address] if given == "option" else []
    env = {**os.environ, **({"RAY_ADDRESS": address} if given == "environment" else {})}
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "iobench",
            "run",
            "--format",
            "npy",
            "--loader",
            "ray",
            "--num-workers",
            "1",
            "--runs",
            "1",
            "--data-dir",
            str(dataset_dir.parent),
            "--results",
            str(tmp_path / "r.jsonl"),
            "-q",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and time.monotonic() - started < 60, done.stderr[-2000:]
    source = "--ray-address" if given == "option" else "RAY_ADDRESS in the environment"
    assert last.startswith("iobench: error: the Ray cluster at ") and f"from {source}" in last, last
    assert "does not answer" in last and "Traceback" not in done.stderr
