"""torch.distributed.checkpoint's saves and loads: FileSystemWriter/Reader on a folder, s3torchconnector's
S3StorageWriter/Reader on object storage; async_save threaded, with pinned-memory staging, and with the process
checkpointer."""

from __future__ import annotations

from typing import Any

from iobench.checkpoint.file_calls import folder_of
from iobench.checkpoint.libraries import DCP_THREADS
from iobench.checkpoint.state import StateSpec, make_state_shapes
from iobench.storage.checkpoints import CheckpointPlace


def dcp_writer(place: CheckpointPlace, threads: int) -> Any:
    import torch.distributed.checkpoint as dcp

    if place.local:
        return dcp.FileSystemWriter(folder_of(place), thread_count=threads, sync_files=True)
    from s3torchconnector import S3ClientConfig
    from s3torchconnector.dcp import S3StorageWriter

    return S3StorageWriter(place.region, place.url, S3ClientConfig(force_path_style=True), thread_count=threads)


def dcp_save(state: dict, place: CheckpointPlace, threads: int = 1) -> None:
    import torch.distributed.checkpoint as dcp

    dcp.save(state, storage_writer=dcp_writer(place, threads))


def dcp_save_threads(state: dict, place: CheckpointPlace) -> None:
    dcp_save(state, place, DCP_THREADS)


def dcp_async_save(state: dict, place: CheckpointPlace) -> Any:
    """`async_save`: the state staged and written by a thread of this process; the future says when it is done."""
    import torch.distributed.checkpoint as dcp

    return dcp.async_save(state, storage_writer=dcp_writer(place, 1))


def dcp_async_pinned_save(state: dict, place: CheckpointPlace) -> Any:
    """`async_save` with DefaultStager's pinned-memory staging (PyTorch's faster path; pinned memory needs CUDA)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

    stager = DefaultStager(
        StagingOptions(
            use_pinned_memory=True, use_shared_memory=False, use_async_staging=True, use_non_blocking_copy=True
        )
    )
    return future(dcp.async_save(state, storage_writer=dcp_writer(place, 1), async_stager=stager))


def dcp_async_process_save(state: dict, place: CheckpointPlace) -> Any:
    """`async_save(async_checkpointer_type=PROCESS)`: staged here, written by DCP's background process (which joins
    this process's group through its store on loopback: DCP_USE_PREFIX_STORE, set by the trial)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

    return future(
        dcp.async_save(
            state, storage_writer=dcp_writer(place, 1), async_checkpointer_type=AsyncCheckpointerType.PROCESS
        )
    )


def future(response: Any) -> Any:
    """async_save's answer: a future, or (with a stager) a response holding the upload's future."""
    return getattr(response, "upload_completion", response)


def dcp_load(place: CheckpointPlace, spec: StateSpec, prepared: Any = None) -> dict:
    """Into a state of the right shapes made before the clock (a model and optimizer exist when a job resumes).
    FileSystemReader takes no thread_count (torch 2.13: its path and an extension registry), so one reader serves
    every DCP entry."""
    import torch.distributed.checkpoint as dcp

    template = prepared if prepared is not None else make_state_shapes(spec)
    if place.local:
        reader = dcp.FileSystemReader(folder_of(place))
    else:
        from s3torchconnector import S3ClientConfig
        from s3torchconnector.dcp import S3StorageReader

        reader = S3StorageReader(place.region, place.url, S3ClientConfig(force_path_style=True))
    dcp.load(template, storage_reader=reader)
    return template
