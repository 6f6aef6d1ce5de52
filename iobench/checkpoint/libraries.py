"""The ways `iobench checkpoint` saves and restores a training state, each as its library's documentation does, and
a raw ceiling on the same file system. A save writes into an empty folder; a restore returns the state with every
byte read (a lazy load, mmap or a memmapped TensorDict, is copied out: timed to the last byte touched, as
`load_state_dict` copies it into a model, not to an open that reads nothing)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from iobench.checkpoint.state import StateSpec, flat_tensors, unflatten, weight_dtype, weight_names

DIRECT_ALIGN = 4096
DCP_THREADS = 4  # FileSystemWriter's thread_count for `dcp-threads` (its default is 1)


@dataclass(frozen=True)
class Library:
    name: str
    # returns None, or for an asynchronous save the future that completes it (timed until the call returns and
    # until it is done)
    save: Callable[[dict, Path], Any]
    restore: Callable[[Path, StateSpec, Any], dict]
    needs: str | None = None  # the module it imports (its pip extra names it)
    ceiling: bool = False  # raw bytes, not a checkpoint: what the file system does for the same bytes
    memory_factor: float = 2.0  # peak host memory of a restore over the state's bytes, about (its issues say 2x)
    modules: tuple[str, ...] = ()  # imported before the clock: a job has its libraries loaded when it saves
    # what a resuming job has before it loads, made before the clock (DCP loads into a state of the right shapes)
    before_restore: Callable[[StateSpec], Any] | None = None
    ranks: bool = False  # under --nproc, every rank saves and loads together (DCP); False: one process
    own_save: bool = True  # False: it saves as another entry does (torch-mmap), or is no checkpoint (raw): not killed

    @property
    def installed(self) -> bool:
        if self.needs is None:
            return True
        try:
            return importlib.util.find_spec(self.needs) is not None
        except ModuleNotFoundError:
            return False


def _torch_save(state: dict, folder: Path) -> None:
    torch.save(state, folder / "state.pt")


def _torch_load(folder: Path, spec: StateSpec, prepared: Any = None) -> dict:
    return torch.load(folder / "state.pt", weights_only=True)


def _torch_load_mmap(folder: Path, spec: StateSpec, prepared: Any = None) -> dict:
    state = torch.load(folder / "state.pt", mmap=True, weights_only=True)
    return _materialised(state)


def _materialised(state: dict) -> dict:
    """Every tensor copied out of its mapping (a model's `load_state_dict` copies it so)."""
    return {k: _materialised(v) if isinstance(v, dict) else v.clone() if isinstance(v, torch.Tensor) else v
            for k, v in state.items()}  # fmt: skip


def _safetensors_save(state: dict, folder: Path) -> None:
    from safetensors.torch import save_file

    tensors = {k: v.contiguous() for k, v in flat_tensors(state).items()}  # save_file takes contiguous tensors only
    save_file(tensors, str(folder / "state.safetensors"), metadata={"step": str(state["step"])})


def _safetensors_load(folder: Path, spec: StateSpec, prepared: Any = None) -> dict:
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = str(folder / "state.safetensors")
    with safe_open(path, framework="pt") as f:
        step = int(f.metadata()["step"])
    # load_file's tensors are views of a mapping of the file (0.27 GB peak for a 3.5 GB state, a warm "restore" in
    # 8 ms): copied out, as a model's load_state_dict copies them, every byte is read within the clock
    return _materialised(unflatten(load_file(path), step))


def _dcp_save(state: dict, folder: Path, threads: int = 1) -> None:
    import torch.distributed.checkpoint as dcp

    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(folder), thread_count=threads, sync_files=True))


def _dcp_save_threads(state: dict, folder: Path) -> None:
    _dcp_save(state, folder, DCP_THREADS)


def _dcp_async_save(state: dict, folder: Path) -> Any:
    """`async_save`: the state staged and written by a thread of this process; the future says when it is done."""
    import torch.distributed.checkpoint as dcp

    return dcp.async_save(state, storage_writer=dcp.FileSystemWriter(str(folder), thread_count=1, sync_files=True))


def _dcp_load(folder: Path, spec: StateSpec, prepared: Any = None) -> dict:
    """Into a state of the right shapes made before the clock (a model and optimizer exist when a job resumes)."""
    import torch.distributed.checkpoint as dcp

    template = prepared if prepared is not None else make_state_shapes(spec)
    dcp.load(template, storage_reader=dcp.FileSystemReader(str(folder)))
    return template


def make_state_shapes(spec: StateSpec) -> dict:
    """The state's structure with zero tensors (no random numbers drawn: cheap)."""
    model, master, exp_avg, exp_avg_sq = {}, {}, {}, {}
    for name, shape in weight_names(spec):
        model[name] = torch.zeros(shape, dtype=weight_dtype(spec, name))
        master[name], exp_avg[name], exp_avg_sq[name] = (torch.zeros(shape) for _ in range(3))
    rng = torch.Generator().get_state()
    return {"model": model, "optimizer": {"master": master, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq},
            "step": 0, "rng": torch.zeros_like(rng)}  # fmt: skip


def _td_key(path: str) -> str:
    """A dotted path as a TensorDict key, reversibly (a name holding `__` came back renamed when `.` was `__`)."""
    return path.replace("%", "%25").replace(".", "%2E")


def _td_path(key: str) -> str:
    return key.replace("%2E", ".").replace("%25", "%")


def _tensordict_save(state: dict, folder: Path) -> None:
    from tensordict import TensorDict

    flat = {_td_key(k): v for k, v in flat_tensors(state).items()}
    flat["step"] = torch.tensor(state["step"])
    TensorDict(flat, batch_size=[]).memmap(str(folder / "state"), num_threads=4)


def _tensordict_load(folder: Path, spec: StateSpec, prepared: Any = None) -> dict:
    from tensordict import TensorDict

    loaded = TensorDict.load_memmap(str(folder / "state"))
    flat = {_td_path(k): v.clone() for k, v in loaded.items() if k != "step"}
    return unflatten(flat, int(loaded["step"]))


def _raw_save(state: dict, folder: Path) -> None:
    """The ceiling: every tensor's bytes in one file, written in order (the file system's own speed for them)."""
    fd = os.open(folder / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        for tensor in flat_tensors(state).values():
            view = memoryview(tensor.contiguous().view(torch.uint8).numpy())
            while view:
                view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _raw_load(folder: Path, spec: StateSpec, prepared: Any = None) -> dict:
    """The ceiling: the file read whole with O_DIRECT into an aligned buffer, 8 MiB pieces on 4 threads (fio's
    `--bs=8M --iodepth=4`; one thread reading 8 MiB at a time reached 0.80 GB/s where torch's mapped load read
    1.43)."""
    import mmap
    from concurrent.futures import ThreadPoolExecutor

    path = folder / "raw.bin"
    size = path.stat().st_size
    buffer = mmap.mmap(-1, max(DIRECT_ALIGN, -(-size // DIRECT_ALIGN) * DIRECT_ALIGN))
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_DIRECT", 0)
    try:
        fd = os.open(path, flags)
    except OSError:  # a file system that refuses O_DIRECT (tmpfs): through the page cache
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    piece = 8 * 2**20
    view = memoryview(buffer)

    def read(start: int) -> int:
        done = 0
        while done < min(piece, size - start):
            got = os.preadv(fd, [view[start + done : start + piece]], start + done)
            if got <= 0:
                break
            done += got
        return done

    try:
        with ThreadPoolExecutor(4) as pool:
            done = sum(pool.map(read, range(0, size, piece)))
    finally:
        os.close(fd)
    return {"raw_bytes": done}


def initialised_state(spec: StateSpec) -> dict:
    """What a resuming job has before it loads: its model and optimizer made and initialised (random values of another
    seed, overwritten by the load). Zeros made cheaply instead left the allocator cold: DCP with 4 threads loaded
    0.72x as fast as its own loop, which loads into the state it made."""
    from dataclasses import replace

    from iobench.checkpoint.state import make_state

    return make_state(replace(spec, seed=spec.seed + 7))


DCP = {"modules": ("torch.distributed.checkpoint",), "before_restore": initialised_state, "ranks": True}

LIBRARIES: dict[str, Library] = {
    lib.name: lib
    for lib in (
        Library("torch", _torch_save, _torch_load),
        Library("torch-mmap", _torch_save, _torch_load_mmap, own_save=False),
        Library(
            "safetensors", _safetensors_save, _safetensors_load, needs="safetensors", modules=("safetensors.torch",)
        ),
        Library("dcp", _dcp_save, _dcp_load, **DCP),
        Library("dcp-threads", _dcp_save_threads, _dcp_load, **DCP),
        Library("dcp-async", _dcp_async_save, _dcp_load, **DCP),
        Library("tensordict", _tensordict_save, _tensordict_load, needs="tensordict", modules=("tensordict",)),
        Library("raw", _raw_save, _raw_load, ceiling=True, memory_factor=1.1, own_save=False),
    )
}
