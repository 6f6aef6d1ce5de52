"""Where a result was measured: versions, CPU, memory, GPU, kernel, file system, git SHA."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import urllib.parse
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iobench import __version__
from iobench.errors import IobenchError

if TYPE_CHECKING:  # torch is imported where it is used: a Ray actor reading a format imports this, not torch
    import torch

PACKAGES = ("torch", "tensordict", "numpy", "h5py", "lmdb", "lz4")  # on every run's path; stored as keys of their own


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cores() -> int:
    """The cores this process may run on (its affinity), which a container or taskset may limit."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def mount_of(path: Path) -> tuple[str, str]:
    """(file system type, source device) of the mount holding path, from /proc/self/mounts."""
    target = os.path.realpath(path)
    best = ("", "unknown", "unknown")
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                source, mountpoint, fstype = line.split()[:3]
                inside = target == mountpoint or target.startswith(mountpoint.rstrip("/") + "/")
                if inside and len(mountpoint) >= len(best[0]):
                    best = (mountpoint, fstype, source)
    except OSError:
        pass
    return best[1], best[2]


def git_sha() -> str:
    """The commit of the code that runs: its own checkout (editable installs, `python -m` from a clone),
    else the checkout `pip install .` was run from (PEP 610's direct_url.json names it), marked
    `-dirty` for uncommitted changes; "unknown" when neither is a git checkout."""
    for root in _source_folders():
        sha = _head(root)
        if sha:
            return sha
    return "unknown"


def _source_folders() -> list[Path]:
    folders = [Path(__file__).resolve().parents[1]]
    try:
        text = metadata.distribution("iobench").read_text("direct_url.json") or "{}"
        url = json.loads(text).get("url", "")
    except (metadata.PackageNotFoundError, ValueError, OSError):
        url = ""
    if url.startswith("file://"):
        folders.append(Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)))
    return folders


def _head(root: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return out + ("-dirty" if dirty else "")


def packages(libraries: Iterable[str] = ()) -> dict[str, str]:
    """The versions of iobench's own libraries and of `libraries` (distribution names: a format's, a loader's)."""
    return {name: _version(name) for name in sorted(dict.fromkeys((*PACKAGES, *libraries)))}


def environment(data_dir: Path, device: torch.device, libraries: Iterable[str] = ()) -> dict[str, Any]:
    """Where the run was measured, as plain values (a record's `Environment` is made of them, in the records' layer);
    `libraries`: what its format and loader read with, beyond iobench's own."""
    import torch

    fstype, source = mount_of(data_dir)
    return dict(
        iobench_version=__version__,
        git_sha=git_sha(),
        python_version=platform.python_version(),
        **{f"{p}_version": _version(p) for p in PACKAGES},
        cpu_model=_cpu_model(),
        cpu_count=os.cpu_count(),
        torch_threads=torch.get_num_threads(),  # torchrun sets OMP_NUM_THREADS=1 for several processes
        ram_bytes=ram_bytes(),
        kernel=platform.release(),
        hostname=platform.node(),
        data_filesystem=fstype,
        data_device=source,
        gpu_name=torch.cuda.get_device_name(device) if device.type == "cuda" else "",
        cuda_version=torch.version.cuda or "",
        packages=packages(libraries),
    )


def can_drop_caches() -> bool:
    return os.access("/proc/sys/vm/drop_caches", os.W_OK)


def max_workers() -> int:
    """Worker processes (or Ray actors) beyond this only thrash: 8 per core, and at least 8."""
    return max(8, 8 * (os.cpu_count() or 1))


def check_parallelism(num_workers: int, torch_threads: int | None) -> None:
    """Workers and torch threads within reason for this machine's cores (100,000 threads crashed torch at exit)."""
    for option, value in (("--num-workers", num_workers), ("--torch-threads", torch_threads)):
        if value is not None and value > max_workers():
            raise IobenchError(
                f"{option} {value} is far above this machine's {os.cpu_count()} cores; the limit "
                f"is {max_workers()} (8 per core)"
            )
