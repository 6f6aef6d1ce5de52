"""The ways `iobench checkpoint` saves and restores a training state, each as its library's documentation does, and
a raw ceiling on the same file system. A save writes to a `CheckpointPlace` (a folder, or an `s3://` prefix where the
library has a way to object storage); a restore returns the state with every byte read (a lazy load, mmap or a
memmapped TensorDict, is copied out: timed to the last byte touched, as `load_state_dict` copies it into a model, not
to an open that reads nothing). Each library declares what it can: the targets it writes to, ranks, a restore straight
onto a device, what it needs installed (and the extra that installs it)."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LOCAL, OBJECT = "local", "object"


def _call(path: str | None) -> Callable | None:
    """`module.function` of this package, imported when first called for (the registry itself imports no torch: the
    command line's --help is made from it)."""
    if path is None:
        return None
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(f"iobench.checkpoint.{module}"), name)


@dataclass(frozen=True)
class Library:
    name: str
    help: str  # what it is, for --help (the list is made from the registry)
    # (state, place) -> None, or for an asynchronous save the future that completes it (timed until the call returns
    # and until it is done)
    saves: str
    restores: str  # (place, spec, prepared) -> the state
    needs: str | None = None  # the module it imports
    extra: str = "checkpoint"  # the pip extra that installs it
    ceiling: bool = False  # raw bytes, not a checkpoint: what the file system does for the same bytes
    memory_factor: float = 2.0  # peak host memory of a restore over the state's bytes, about (its issues say 2x)
    modules: tuple[str, ...] = ()  # imported before the clock: a job has its libraries loaded when it saves
    # what a resuming job has before it loads, made before the clock (DCP loads into a state of the right shapes)
    prepares: str | None = None
    ranks: bool = False  # under --nproc, every rank saves and loads together (DCP); False: one process
    saves_as: str | None = None  # its save is another entry's (torch-mmap: torch's): killed as that one, not again
    targets: tuple[str, ...] = (LOCAL,)  # where it writes: a local folder, object storage
    onto: str | None = None  # restores straight onto a CUDA device (no host copy first): (place, spec, device)
    needs_cuda: str | None = None  # why it runs only with a CUDA device (pinned staging, GDS)
    # runs in a process group even alone, its ranks joined by a TCP store on loopback: DCP's background process joins
    # the group's store through MASTER_ADDR and MASTER_PORT (`iobench.system.ranks.TCP_STORE_EXPOSURE`)
    group: bool = False

    @property
    def save(self) -> Callable[..., Any]:
        return _call(self.saves)  # type: ignore[return-value]

    @property
    def restore(self) -> Callable[..., dict]:
        return _call(self.restores)  # type: ignore[return-value]

    @property
    def before_restore(self) -> Callable[..., Any] | None:
        return _call(self.prepares)

    @property
    def onto_device(self) -> Callable[..., dict] | None:
        return _call(self.onto)

    @property
    def installed(self) -> bool:
        for module in (self.needs, *self.modules):
            if module is None:
                continue
            try:
                if importlib.util.find_spec(module) is None:
                    return False
            except ModuleNotFoundError:
                return False
        return True

    @property
    def killed(self) -> bool:
        """Whether the kill test kills its save (its own; a ceiling is no checkpoint)."""
        return self.saves_as is None and not self.ceiling


DCP = {
    "modules": ("torch.distributed.checkpoint",),
    "prepares": "state.initialised_state",
    "ranks": True,
    "targets": (LOCAL, OBJECT),
    "restores": "dcp_calls.dcp_load",
}
SAFETENSORS = {"needs": "safetensors", "modules": ("safetensors.torch",)}
FASTSAFETENSORS = {
    "needs": "fastsafetensors",
    "saves_as": "safetensors",
    "modules": ("safetensors.torch",),
    "saves": "file_calls.safetensors_save",
    "restores": "file_calls.fastsafetensors_load",
}
DCP_THREADS = 4  # FileSystemWriter's thread_count for `dcp-threads` (its default is 1)

LIBRARIES: dict[str, Library] = {
    lib.name: lib
    for lib in (
        Library(
            "torch",
            "torch.save, torch.load(weights_only=True); S3Checkpoint on object storage",
            "file_calls.torch_save",
            "file_calls.torch_load",
            targets=(LOCAL, OBJECT),
        ),
        Library(
            "torch-mmap",
            "torch.load(mmap=True), copied out",
            "file_calls.torch_save",
            "file_calls.torch_load_mmap",
            saves_as="torch",
        ),
        Library(
            "safetensors",
            "save_file, load_file copied out, safe_open(device=...) onto a device; bytes put and got on object storage",
            "file_calls.safetensors_save",
            "file_calls.safetensors_load",
            targets=(LOCAL, OBJECT),
            onto="file_calls.safetensors_onto",
            **SAFETENSORS,
        ),
        Library(
            "fastsafetensors",
            "fastsafe_open(nogds=True) of safetensors' file",
            onto="file_calls.fastsafetensors_onto",
            **FASTSAFETENSORS,
        ),
        Library(
            "fastsafetensors-gds",
            "fastsafe_open with GPUDirect Storage, straight to the device",
            onto="file_calls.fastsafetensors_gds_onto",
            needs_cuda="GPUDirect Storage reads to a CUDA device",
            **FASTSAFETENSORS,
        ),
        Library(
            "dcp",
            "torch.distributed.checkpoint, thread_count 1; S3StorageWriter/Reader on object storage",
            "dcp_calls.dcp_save",
            **DCP,
        ),
        Library("dcp-threads", f"DCP, thread_count {DCP_THREADS}", "dcp_calls.dcp_save_threads", **DCP),
        Library("dcp-async", "DCP async_save, staged and written by a thread", "dcp_calls.dcp_async_save", **DCP),
        Library(
            "dcp-async-pinned",
            "DCP async_save with pinned-memory staging",
            "dcp_calls.dcp_async_pinned_save",
            needs_cuda="pinned staging needs a CUDA device",
            **DCP,
        ),
        Library(
            "dcp-async-process",
            "DCP async_save written by its background process",
            "dcp_calls.dcp_async_process_save",
            group=True,
            **DCP,
        ),
        Library(
            "tensordict",
            "TensorDict.memmap, load_memmap copied out",
            "file_calls.tensordict_save",
            "file_calls.tensordict_load",
            needs="tensordict",
            modules=("tensordict",),
        ),
        Library(
            "raw",
            "a reference: one write and fsync, one O_DIRECT read in 8 MiB pieces on 4 threads",
            "file_calls.raw_save",
            "file_calls.raw_load",
            ceiling=True,
            memory_factor=1.1,
        ),
    )
}


def libraries_help() -> str:
    """--libraries' help, from the registry."""
    return "Comma list, or all: " + "; ".join(f"{lib.name} ({lib.help})" for lib in LIBRARIES.values()) + "."
