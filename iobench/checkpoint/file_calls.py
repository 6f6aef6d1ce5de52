"""The file libraries' saves and restores, each as its documentation does: torch (S3Checkpoint on object storage),
safetensors (bytes put and got on object storage; safe_open(device=...) onto a device), fastsafetensors, a TensorDict
memmap, and the raw reference. A restore returns the state with every byte read (a lazy load, mmap or a memmapped
TensorDict, is copied out: timed to the last byte touched, as `load_state_dict` copies it into a model)."""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from iobench.checkpoint.state import StateSpec, flat_tensors, unflatten
from iobench.storage.checkpoints import CheckpointPlace

DIRECT_ALIGN = 4096


def folder_of(place: CheckpointPlace) -> str:
    if place.folder is None:
        raise ValueError("a local folder only")
    return place.folder


def s3_checkpoint(place: CheckpointPlace) -> Any:
    """s3torchconnector's checkpoint client of the place's store (its keys from the environment)."""
    from s3torchconnector import S3Checkpoint, S3ClientConfig

    config = S3ClientConfig(force_path_style=True)
    return S3Checkpoint(region=place.region, endpoint=place.endpoint, s3client_config=config)


def torch_save(state: dict, place: CheckpointPlace) -> None:
    if place.local:
        torch.save(state, place.file("state.pt"))
        return
    with s3_checkpoint(place).writer(place.file("state.pt")) as writer:  # S3Checkpoint, as its README saves
        torch.save(state, writer)


def torch_load(place: CheckpointPlace, spec: StateSpec, prepared: Any = None) -> dict:
    if place.local:
        return torch.load(place.file("state.pt"), weights_only=True)
    with s3_checkpoint(place).reader(place.file("state.pt")) as reader:
        return torch.load(reader, weights_only=True)


def torch_load_mmap(place: CheckpointPlace, spec: StateSpec, prepared: Any = None) -> dict:
    state = torch.load(place.file("state.pt"), mmap=True, weights_only=True)
    return materialised(state)


def materialised(state: dict) -> dict:
    """Every tensor copied out of its mapping (a model's `load_state_dict` copies it so)."""
    return {
        k: materialised(v) if isinstance(v, dict) else v.clone() if isinstance(v, torch.Tensor) else v
        for k, v in state.items()
    }


def safetensors_save(state: dict, place: CheckpointPlace) -> None:
    from safetensors.torch import save, save_file

    tensors = {k: v.contiguous() for k, v in flat_tensors(state).items()}  # save_file takes contiguous tensors only
    metadata = {"step": str(state["step"])}
    if place.local:
        save_file(tensors, place.file("state.safetensors"), metadata=metadata)
        return
    with s3_checkpoint(place).writer(place.file("state.safetensors")) as writer:  # the bytes put as one object
        writer.write(save(tensors, metadata=metadata))


def safetensors_load(place: CheckpointPlace, spec: StateSpec, prepared: Any = None) -> dict:
    from safetensors import safe_open
    from safetensors.torch import load, load_file

    if not place.local:
        with s3_checkpoint(place).reader(place.file("state.safetensors")) as reader:
            data = reader.read()
        return unflatten(load(data), step_of_header(data))
    path = place.file("state.safetensors")
    with safe_open(path, framework="pt") as f:
        step = int(f.metadata()["step"])
    # load_file's tensors are views of a mapping of the file (0.27 GB peak for a 3.5 GB state, a warm "restore" in
    # 8 ms): copied out, as a model's load_state_dict copies them, every byte is read within the clock
    return materialised(unflatten(load_file(path), step))


def step_of_header(data: bytes) -> int:
    """The step from a safetensors file's metadata (its header: a length, then JSON; read as data only)."""
    size = int.from_bytes(data[:8], "little")
    if not 0 < size <= min(len(data) - 8, 100 * 2**20):
        raise ValueError("not a safetensors header")
    return int(json.loads(data[8 : 8 + size])["__metadata__"]["step"])


def safetensors_onto(place: CheckpointPlace, spec: StateSpec, device: str) -> dict:
    """safe_open(device=...): each tensor read to the device (its documented way to load onto a GPU)."""
    from safetensors import safe_open

    with safe_open(place.file("state.safetensors"), framework="pt", device=device) as f:
        step = int(f.metadata()["step"])
        flat = {k: f.get_tensor(k) for k in f.keys()}
    return unflatten(flat, step)


def fastsafetensors_load(
    place: CheckpointPlace, spec: StateSpec, prepared: Any = None, device: str = "cpu", gds: bool = False
) -> dict:
    """fastsafe_open as its README opens a file: the file read whole into its buffer (nogds on the host), tensors
    that share it (no copy needed: they keep the buffer alive)."""
    from fastsafetensors import fastsafe_open

    path = place.file("state.safetensors")
    with fastsafe_open([path], device=device, nogds=not gds) as f:
        step = int(f.metadata()[path]["step"])
        flat = {k: f.get_tensor(k) for k in f.keys()}
    return unflatten(flat, step)


def fastsafetensors_onto(place: CheckpointPlace, spec: StateSpec, device: str) -> dict:
    return fastsafetensors_load(place, spec, None, device)


def fastsafetensors_gds_onto(place: CheckpointPlace, spec: StateSpec, device: str) -> dict:
    return fastsafetensors_load(place, spec, None, device, gds=True)


def td_key(path: str) -> str:
    """A dotted path as a TensorDict key, reversibly (a name holding `__` came back renamed when `.` was `__`)."""
    return path.replace("%", "%25").replace(".", "%2E")


def td_path(key: str) -> str:
    return key.replace("%2E", ".").replace("%25", "%")


def tensordict_save(state: dict, place: CheckpointPlace) -> None:
    from tensordict import TensorDict

    flat = {td_key(k): v for k, v in flat_tensors(state).items()}
    flat["step"] = torch.tensor(state["step"])
    TensorDict(flat, batch_size=[]).memmap(place.file("state"), num_threads=4)


def tensordict_load(place: CheckpointPlace, spec: StateSpec, prepared: Any = None) -> dict:
    from tensordict import TensorDict

    loaded = TensorDict.load_memmap(place.file("state"))
    flat = {td_path(k): v.clone() for k, v in loaded.items() if k != "step"}
    return unflatten(flat, int(loaded["step"]))


def raw_save(state: dict, place: CheckpointPlace) -> None:
    """The ceiling: every tensor's bytes in one file, written in order (the file system's own speed for them)."""
    fd = os.open(place.file("raw.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        for tensor in flat_tensors(state).values():
            view = memoryview(tensor.contiguous().view(torch.uint8).numpy())
            while view:
                view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def raw_load(place: CheckpointPlace, spec: StateSpec, prepared: Any = None) -> dict:
    """The ceiling: the file read whole with O_DIRECT into an aligned buffer, 8 MiB pieces on 4 threads (fio's
    `--bs=8M --iodepth=4`; one thread reading 8 MiB at a time reached 0.80 GB/s where torch's mapped load read
    1.43)."""
    import mmap
    from concurrent.futures import ThreadPoolExecutor

    from iobench.system.fsutil import pread_full

    path = place.file("raw.bin")
    size = os.stat(path).st_size
    buffer = mmap.mmap(-1, max(DIRECT_ALIGN, -(-size // DIRECT_ALIGN) * DIRECT_ALIGN))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_DIRECT", 0))
    except OSError:  # a file system that refuses O_DIRECT (tmpfs): through the page cache
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    piece = 8 * 2**20
    view = memoryview(buffer)
    try:
        with ThreadPoolExecutor(4) as pool:
            done = sum(pool.map(lambda at: pread_full(fd, view[at : at + piece], at), range(0, size, piece)))
    finally:
        os.close(fd)
    return {"raw_bytes": min(done, size)}
