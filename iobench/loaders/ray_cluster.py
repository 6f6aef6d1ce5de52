"""The Ray instance `--loader ray` and `ray-data` run on: the cluster at `--ray-address`, or a local instance iobench
starts, which keeps iobench's rules for the servers it starts.

- **Loopback only.** `ray.init()` with no address made raylet, gcs_server, every worker and the driver listen on
  every interface, and `_node_ip_address="127.0.0.1"` is turned back into the machine's address. Ray's own switch for
  a local-only instance (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`: "use loopback IP as the local IP address") makes the
  node's address 127.0.0.1, and every server binds to the node's address.
- **Its files in iobench's folder.** `_temp_dir` is a fresh private folder (0700) in iobench's state folder, not
  `/tmp/ray` (left behind, mode 0777); the token its servers check is a 0600 file there, not `~/.ray/auth_token`
  (0644); the dashboard is off.
- **A cluster that answers, or one line.** `--ray-address` (or `RAY_ADDRESS` in the environment, which Ray follows
  when no address is given) is checked to accept a connection within `CONNECT_TIMEOUT_S` at the address Ray will
  use: Ray turns a loopback address into the node's (127.0.0.1:6390 became 192.0.2.2:6390) and then printed its C++
  warnings for minutes against a cluster that listens on loopback only.
- **Gone on every exit path.** `ray.shutdown()` at exit, and a guard process (`iobench.system.reaper`) that ends
  what Ray started and removes the folder when this process ends, SIGKILL included (Ray's agents outlived a
  SIGKILLed driver for more than a minute): what this process started, and what holds the run's owner token in its
  environment (set before Ray starts), never a process that merely names the folder.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import secrets
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from iobench.errors import IobenchError
from iobench.system.reaper import TERM_WAIT_S

LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
CONNECT_TIMEOUT_S = 5.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise IobenchError("--loader ray needs Ray: pip install 'iobench[ray]'") from None
    return ray


def connect(address: str | None) -> Any:
    """Ray, initialised once per process: the cluster at `address` (or `RAY_ADDRESS`'s), or a local instance on
    loopback."""
    source = "--ray-address"
    if address is None and os.environ.get("RAY_ADDRESS"):
        address, source = os.environ["RAY_ADDRESS"], "RAY_ADDRESS in the environment"
    running = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    if address is None and _Local.folder is None and not running:
        _local_settings()  # read when Ray is imported (its constants, its token loader): set before where possible
    ray = import_ray()
    if ray.is_initialized():
        return ray
    try:
        if address is None:
            _start_local(ray)
        else:
            check_answers(address, source)
            with _own_sigterm():
                ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"{address} (from {source})" if address else "a local instance"
        raise IobenchError(f"cannot start Ray on {where}: {str(exc).splitlines()[0]}") from None
    return ray


def check_answers(address: str, source: str) -> None:
    """The cluster accepts a connection at the address Ray will connect to (its rewriting of a loopback address
    applied), within CONNECT_TIMEOUT_S; else one line naming both addresses and where the address came from. A Ray
    client address (ray://) is left to Ray."""
    import socket

    if address.startswith("ray://"):
        return
    from ray._private.services import canonicalize_bootstrap_address

    target = canonicalize_bootstrap_address(address)
    if target is None:  # "local": a local instance
        return
    host, _, port = target.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        turned = (
            f" (Ray turns {address} into {target}: a cluster on loopback only is not reachable so)"
            if (target != address)
            else ""
        )
        raise IobenchError(
            f"the Ray cluster at {target}, from {source}, does not answer within "
            f"{CONNECT_TIMEOUT_S:g} s: {why}{turned}; start it on the node's address, or leave "
            "--ray-address and RAY_ADDRESS out for a local instance"
        ) from None


class _Local:
    """The local instance's folder, and its guard once started."""

    folder: Path | None = None
    token: str = ""
    reaper: Any = None


def _local_settings() -> None:
    """The folder, the token and the environment of a local instance, before Ray is imported."""
    from iobench.system.private import create_exclusive, private_dir
    from iobench.system.reaper import OWNER_VARIABLE, new_token

    folder = _Local.folder = private_dir("ray")
    token = folder / "auth_token"
    create_exclusive(token, secrets.token_hex(32).encode())
    _Local.token = new_token()
    os.environ.update(
        {LOCAL_ONLY: "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), OWNER_VARIABLE: _Local.token}
    )


def _start_local(ray: Any) -> None:
    from iobench.system.reaper import Reaper, descendants

    if _Local.folder is None:
        _local_settings()
    _reread(ray)
    # before Ray starts anything: a kill during its start is covered
    reaper = _Local.reaper = Reaper(_Local.folder, _Local.token)
    atexit.register(_stop_local, ray)  # after ray's own (registered when it was imported): runs before it
    with _own_sigterm():
        ray.init(
            include_dashboard=False,
            logging_level=logging.WARNING,
            log_to_driver=False,
            _temp_dir=str(_Local.folder),
        )
    os.chmod(_Local.folder, 0o700)  # Ray makes its temp folder 0777
    reaper.watch(descendants(os.getpid()))


def _reread(ray: Any) -> None:
    """Ray imported before the settings were made (a script of the user's, a test) read them with its constants and
    its token loader: they read them again, as Ray's own tests make them (`reset_cache`)."""
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False
    with contextlib.suppress(ImportError, AttributeError):
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


@contextlib.contextmanager
def _own_sigterm() -> Iterator[None]:
    """`ray.init` replaces the SIGTERM handler with its own `sys.exit(15)`: iobench's (records kept, rc 130) is put
    back."""
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if threading.current_thread() is threading.main_thread() and before is not None:
            signal.signal(signal.SIGTERM, before)


def watch_new_processes() -> None:
    """The processes Ray has started since (actors' workers) named to the guard too."""
    if _Local.reaper is not None:
        from iobench.system.reaper import descendants

        _Local.reaper.watch(descendants(os.getpid()))


def shutdown() -> None:
    """Ray shut down now, and the local instance's guard and folder with it, not at exit: for a process that goes on
    after its Ray loaders (a test module; the guard had lived on to the end of the test session). A later loader
    starts a fresh instance."""
    if "ray" not in sys.modules:
        return
    _stop_local(sys.modules["ray"])
    _Local.folder, _Local.token = None, ""


def _stop_local(ray: Any) -> None:
    """At exit: Ray shut down (it ends its processes one after the other: 1.35 s here), then its guard ends what is
    left and removes the folder; a command being ended by a signal does not wait for the guard. Ending gcs_server and
    the raylet under the driver instead (the guard first) left the driver waiting 5 s on them."""
    from iobench.system.signals import ENDING

    reaper, _Local.reaper = _Local.reaper, None
    if reaper is not None:  # interrupted inside `ray.init`, its processes were never named: named before they go
        from iobench.system.reaper import descendants

        reaper.watch(descendants(os.getpid()))
    try:
        ray.shutdown()
    finally:
        if reaper is not None:
            reaper.close(wait=0.0 if ENDING.is_set() else TERM_WAIT_S + 2.0)
