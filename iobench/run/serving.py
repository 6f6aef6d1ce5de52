"""Where a run's formats are read from, and the ceilings its records are held to: the data folder served as S3 on
loopback (`served`, stopped on every exit), or a store given by its endpoint; this machine's limits or the stored
ones of that store and profile (`limits_of`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iobench.errors import IobenchError
from iobench.events import Events
from iobench.measuring.machine_limits import stored_or_measured
from iobench.results.limits import MachineLimits, RemoteLimits
from iobench.storage.remote import FuseOptions, RemoteTarget
from iobench.storage.remote.profiles import Profile

if TYPE_CHECKING:
    import torch


@contextmanager
def served(
    profile: Profile | None, endpoint_url: str | None, dataset_dir: Path, fuse: FuseOptions | None = None
) -> Iterator[RemoteTarget | None]:
    """With a profile: the data folder served as S3 on loopback, behind the shaper, for as long as the block
    runs (stopped on every exit); with an endpoint: that store, as it is; without either: nothing."""
    from iobench.storage.remote.emulator import Emulator
    from iobench.storage.remote.endpoint import store_at

    fuse = fuse or FuseOptions()
    if endpoint_url is not None:
        yield RemoteTarget(store_at(endpoint_url), None, fuse=fuse)
        return
    if profile is None:
        yield None
        return

    from iobench.data.manifest import served_files

    emulator = Emulator(dataset_dir.parent, profile, served=served_files([dataset_dir]))
    with emulator as endpoint:
        yield RemoteTarget(
            endpoint, profile, emulator.access_log, emulator.pids, dataset_dir.parent, fuse, emulator.settings
        )


@contextmanager
def serving_folder(
    data_dir: Path, profile: str, latency_ms: float | None, connection_mb_per_s: float | None
) -> Iterator[tuple[Any, Profile, list[str]]]:
    """`iobench serve`: every prepared dataset of `data_dir` served as S3 on loopback through the profile, for as
    long as the block runs (stopped on every exit): its endpoint, the profile and the buckets (one per dataset)."""
    from iobench.data.manifest import dataset_dirs, served_files
    from iobench.storage.remote.emulator import Emulator
    from iobench.storage.remote.profiles import profile as named

    chosen = named(profile, latency_ms, connection_mb_per_s)
    if not data_dir.is_dir():
        raise IobenchError(f"--data-dir {data_dir} is not a folder")
    datasets = dataset_dirs(data_dir)
    with Emulator(data_dir, chosen, served=served_files(datasets)) as endpoint:
        yield endpoint, chosen, [p.name for p in datasets]


def limits_of(
    remote: RemoteTarget | None,
    dataset_dir: Path,
    device: torch.device,
    results: Path,
    events: Events,
    read_limit: float | None = None,
) -> MachineLimits | RemoteLimits | None:
    """The ceilings the records are held to: this machine's (measured once, then stored beside the results), or,
    reading object storage, the stored ones of that store and profile."""
    if remote is None:
        return stored_or_measured(results, dataset_dir, device, events, read_limit)
    return remote_limits(remote, dataset_dir, results, events)


def remote_limits(remote: RemoteTarget, dataset_dir: Path, results: Path, events: Events) -> RemoteLimits | None:
    """The stored ceilings of this store and profile (measured by `iobench limits --remote` in a process of its
    own: measuring here would start obstore's runtime before the workers fork)."""
    from iobench.measuring.object_store_limits import stored_remote_limits

    if remote.profile is not None:
        events.say(f"serving {dataset_dir.parent} at {remote.endpoint.url} (S3, {remote.profile.describe()})")
    else:
        bucket = remote.endpoint.bucket_for(dataset_dir.name)
        events.say(f"reading {dataset_dir.name}'s formats from s3://{bucket} at {remote.endpoint.url}")
    limits = stored_remote_limits(results, remote)
    if limits is None:
        how = remote.profile.options() if remote.profile is not None else f"--endpoint-url {remote.endpoint.given}"
        events.say(
            f"no ceilings stored for this store and profile (% of limit: -); `iobench limits {how}` measures them"
        )
    return limits
