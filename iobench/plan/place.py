"""Where a measuring command runs and keeps its records: the values every measuring command shares (the data folder,
the dataset, the device, object storage and how a FUSE mount reads it), checked once here for run, sweep, tune,
checkpoint and limits (`place_of`); the command line declares their options once
(`iobench.cli.option_groups.takes_place`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from iobench.choices import DeviceChoice
from iobench.errors import IobenchError
from iobench.storage.remote import FUSE_CHUNK, FuseOptions
from iobench.storage.remote.profiles import Profile


@dataclass(frozen=True)
class PlaceValues:
    """The place's options as the command line parsed them (`iobench.cli.option_groups.takes_place` builds one and
    hands it to the command): what `place_of` checks and makes a RunPlace of."""

    data_dir: Path | None = None
    dataset: str | None = None
    device: str = "auto"
    remote: str | None = None
    endpoint_url: str | None = None
    latency_ms: float | None = None
    connection_mb_per_s: float | None = None
    fuse_chunk: str | None = None
    fuse_read_ahead: str | None = None
    flags: tuple[tuple[str, str], ...] = ()  # each option's flag by parameter name, where not --name-of-it


# the place's options, by parameter name: every measuring command takes them (iobench.cli.option_groups.takes_place)
PLACE = tuple(f.name for f in fields(PlaceValues) if f.name != "flags")
REMOTE_FLAGS = ("remote", "endpoint_url", "latency_ms", "connection_mb_per_s", "fuse_chunk", "fuse_read_ahead")


@dataclass(frozen=True)
class RunPlace:
    data_dir: Path
    dataset: str | None
    device: DeviceChoice  # as given: auto, cpu, cuda, cuda:N (its syntax checked)
    results: Path
    cprofile: bool = False  # --profile: one more epoch under cProfile (not `remote`, the network profile)
    size: int | None = None  # --size: the dataset of this many samples (prepared when missing)
    remote: Profile | None = None  # --remote: the formats read from object storage served with this profile
    endpoint_url: str | None = None  # --endpoint-url: the formats read from this S3-compatible store instead
    fuse: FuseOptions | None = None  # --fuse-chunk, --fuse-read-ahead: how a FUSE mount reads objects
    rank_timeout: float = 1800.0  # --rank-timeout: seconds a rank waits for the others at a barrier
    # the place's options as typed, under their flags (the remote ones): what a printed command repeats
    typed: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", DeviceChoice(self.device))  # a str too (a record's): checked once here

    def place_flags(self, dataset: str | None = None) -> list[str]:
        """The options that find this dataset (`dataset`: the one the run found), for a command iobench suggests: the
        data folder where it is not the default, the dataset where the run named it or its size."""
        flags = ["--data-dir", str(self.data_dir)] if self.data_dir != Path("data") else []
        name = self.dataset or (dataset if self.size is not None else None)
        return [*flags, *(["--dataset", name] if name is not None else [])]

    def remote_flags(self) -> list[str]:
        """The object-storage options as typed, and the data folder and dataset: a run that reads the same store."""
        return [part for flag, value in self.typed for part in (flag, value)]

    @property
    def object_storage(self) -> bool:
        """The formats are read from object storage (iobench's server, or the store at --endpoint-url)."""
        return self.remote is not None or self.endpoint_url is not None


def place_of(values: PlaceValues, results: Path, *, nproc: int | None = None, **more: Any) -> RunPlace:
    """The place from a command's place options, every check made once: --remote's profile and its overrides,
    --endpoint-url, the FUSE options."""
    network = _network(values.remote, values.latency_ms, values.connection_mb_per_s, nproc, values.endpoint_url)
    fuse = _fuse(values.fuse_chunk, values.fuse_read_ahead, network is not None or values.endpoint_url is not None)
    named = dict(values.flags)
    typed = tuple(
        (named.get(k, "--" + k.replace("_", "-")), str(getattr(values, k)))
        for k in (*REMOTE_FLAGS, "data_dir", "dataset")
        if getattr(values, k) is not None
    )
    # Path() again: on the lent GPU machine (typer 0.27.2, click 8.5.0) a path option's value was a str
    return RunPlace(
        Path(values.data_dir or "data"),
        values.dataset,
        DeviceChoice(values.device),
        Path(results),
        remote=network,
        endpoint_url=values.endpoint_url,
        fuse=fuse,
        typed=typed,
        **more,
    )


def network_of(remote: str | None, endpoint_url: str | None) -> Profile | None:
    """--remote's profile as a command without the network overrides takes it (feed), checked as `place_of` does."""
    return _network(remote, None, None, None, endpoint_url)


def _fuse(chunk: str | None, read_ahead: str | None, remote: bool) -> FuseOptions | None:
    if chunk is None and read_ahead is None:
        return None
    from iobench.storage.remote.mount import check_size

    return FuseOptions(
        check_size("--fuse-chunk", chunk, remote, 64 * 2**10) if chunk is not None else FUSE_CHUNK,
        check_size("--fuse-read-ahead", read_ahead, remote, 0) if read_ahead is not None else None,
    )


def _network(
    remote: str | None,
    latency_ms: float | None,
    connection_mb_per_s: float | None,
    nproc: int | None,
    endpoint_url: str | None,
) -> Profile | None:
    """--remote's profile with its overrides; the overrides alone are refused (they shape nothing)."""
    if endpoint_url is not None and (remote is not None or nproc is not None):
        raise IobenchError("--endpoint-url reads a store as it is: not with --remote (iobench's own) or --nproc")
    if remote is None:
        if latency_ms is not None or connection_mb_per_s is not None:
            raise IobenchError("--latency-ms and --connection-mb-per-s shape --remote: give --remote PROFILE too")
        return None
    if nproc is not None:
        raise IobenchError("--remote does not run under torchrun (--nproc) in this release")
    from iobench.storage.remote.profiles import profile

    return profile(remote, latency_ms, connection_mb_per_s)
