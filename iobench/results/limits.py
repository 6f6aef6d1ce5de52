"""The ceilings no loader can beat, as stored beside the results (`iobench limits`, limits.json and
remote_limits.json), and a run's share of one: `MachineLimits` of one host and data device; `RemoteLimits` of
object storage under one network profile, GETs per second at the dataset's sample size and at 4 KiB and MB/s
of one large object read in ranges, with one connection and with `connections`, through the profile and, for
iobench's own server, without it (what the emulator itself delivers here: a profile that asks more than that
is not what a run gets). What measures them: `iobench.measuring.machine_limits` and `.object_store_limits`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from iobench.results.checked import RecordError, mapping, parsed

PAGE = 4096  # the unit of a random read (a page; O_DIRECT alignment)


@dataclass(frozen=True, kw_only=True)
class MachineLimits:
    """The ceilings of one host and data device (`iobench limits`), stored beside the results."""

    measured_at: str = ""
    hostname: str
    data_dir: str = ""
    data_filesystem: str = ""
    data_device: str
    probe_file: str = ""
    probe_bytes: int = 0
    storage_read_mb_per_s: float
    storage_read_method: str = ""
    page_cache_read_mb_per_s: float
    h2d_pageable_mb_per_s: float | None = None
    h2d_pinned_mb_per_s: float | None = None
    d2d_mb_per_s: float | None = None
    cuda_device: str | None = None
    read_limit_mb_per_s: float | None = None  # measured under this read throttle (--read-limit)
    # Random O_DIRECT reads at queue depth 1 and 32, of 4 KiB and of the sample size rounded up to 4 KiB
    # (the block a shuffled cold epoch must read per sample), and gathering samples from memory.
    random_read_4k_qd1_iops: float | None = None
    random_read_4k_qd32_iops: float | None = None
    random_read_block_bytes: int | None = None
    random_read_block_qd1_iops: float | None = None
    random_read_block_qd32_iops: float | None = None
    memory_gather_mb_per_s: float | None = None
    memory_gather_method: str = ""  # the fastest of the gathers tried (torch, numpy take, fancy index, rows)
    gather_sample_bytes: int | None = None

    def __post_init__(self) -> None:
        """A ceiling is a positive, finite rate: 0 would divide every share by zero after a
        measurement, a negative one gives negative shares (a crafted or damaged limits.json)."""
        for f in fields(self):
            value = getattr(self, f.name)
            rate = f.name.endswith(("_mb_per_s", "_iops")) and f.name != "read_limit_mb_per_s"
            if rate and value is not None and not (0 < value < math.inf):
                raise RecordError(f"the ceiling {f.name!r} is {value!r}; a ceiling must be a positive rate")

    def random_iops(self, sample_bytes: int) -> float | None:
        """Queue-depth-32 random reads of the block that holds one sample, when measured for it."""
        block = read_block(sample_bytes)
        if block == PAGE:
            return self.random_read_4k_qd32_iops
        return self.random_read_block_qd32_iops if block == self.random_read_block_bytes else None

    @property
    def key(self) -> str:
        """Limits are stored per host, data device and read throttle: one host may hold datasets on
        several disks, and a throttled disk is another disk."""
        return limits_key(self.hostname, self.data_device, self.read_limit_mb_per_s)

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: object) -> MachineLimits:
        return parsed(cls, mapping(data, "limits entry"))


def read_block(sample_bytes: int) -> int:
    """What one random read of a sample costs the storage: its size rounded up to whole 4 KiB pages."""
    return max(PAGE, -(-sample_bytes // PAGE) * PAGE)


def limits_key(hostname: str, data_device: str, read_limit_mb_per_s: float | None = None) -> str:
    throttle = f"@{read_limit_mb_per_s:g}MB/s" if read_limit_mb_per_s is not None else ""
    return f"{hostname}:{data_device}{throttle}"


@dataclass(frozen=True, kw_only=True)
class LimitShare:
    """The run's MB/s as a share of the ceiling of its pattern (None: no ceiling applies or known)."""

    limit_name: str | None = None
    limit_mb_per_s: float | None = None
    percent_of_limit: float | None = None


CEILING_WORDS = {
    "storage_read_mb_per_s": "the disk's sequential read",
    "page_cache_read_mb_per_s": "the page-cache copy",
    "memory_gather_mb_per_s": "the in-memory gather of these samples",
    "random_read_qd32_samples": "random reads of a sample at queue depth 32",
    "h2d_pinned_mb_per_s": "host-to-device copies from pinned memory",
    "h2d_pageable_mb_per_s": "host-to-device copies from pageable memory",
}


def ceiling_words(name: str | None) -> str:
    """A ceiling's stored name in words for prose (a report said "24% of memory_gather_mb_per_s")."""
    if name is None:
        return "its ceiling"
    if name in CEILING_WORDS:
        return CEILING_WORDS[name]
    for kind, words in (("remote_large_object_", "large-object GETs"), ("remote_sample_gets_", "sample-sized GETs")):
        if name.startswith(kind):
            return f"the store's {words} on {name.removeprefix(kind).split('_')[0]} connection(s)"
    return name.replace("_mb_per_s", "").replace("_", " ")


LOOPBACK = "loopback"  # the endpoint of iobench's own server, whatever port a run had
SHORT_OF_PROFILE = 0.9  # the emulator delivered less than this share of what the profile asks


@dataclass(frozen=True, kw_only=True)
class RemoteRates:
    """One set of figures: GETs/s and first-byte median with one connection, GETs/s and MB/s with one and N."""

    gets_sample_1: float
    gets_sample_n: float
    gets_4k_1: float
    gets_4k_n: float
    first_byte_ms: float  # the median 4 KiB GET with one connection (latency and the server's own time)
    mb_per_s_1: float
    mb_per_s_n: float


@dataclass(frozen=True, kw_only=True)
class RemoteLimits:
    measured_at: str
    hostname: str
    endpoint: str  # LOOPBACK for iobench's server, else the store's URL
    profile: str  # the profile's name; "external" for a store iobench did not start
    latency_ms: float | None = None
    connection_mb_per_s: float | None = None
    connections: int
    probe_object: str  # bucket/key of the object read
    probe_bytes: int  # how much of it the bulk reads moved
    sample_bytes: int
    shaped: RemoteRates  # through the profile (for an external store: as it is)
    unshaped: RemoteRates | None = None  # iobench's server without the shaper

    def __post_init__(self) -> None:
        for rates in (self.shaped, self.unshaped):
            for f in fields(RemoteRates) if rates is not None else ():
                value = getattr(rates, f.name)
                if not (0 < value < math.inf):
                    raise RecordError(f"the remote ceiling {f.name!r} is {value!r}; a ceiling must be positive")

    @property
    def key(self) -> str:
        return remote_limits_key(self.hostname, self.endpoint, self.latency_ms, self.connection_mb_per_s)

    @property
    def profile_asks_mb_per_s(self) -> float | None:
        """What the profile lets `connections` connections move together (None: uncapped)."""
        return self.connection_mb_per_s * self.connections if self.connection_mb_per_s else None

    @property
    def short_of_profile(self) -> bool:
        """The emulator delivered visibly less than the profile asks with N connections: runs with that many
        requests in flight meet this machine's emulator, not the profile."""
        asks = self.profile_asks_mb_per_s
        return asks is not None and self.endpoint == LOOPBACK and self.shaped.mb_per_s_n < SHORT_OF_PROFILE * asks

    def ceiling(self, sample_bytes: int) -> tuple[str, float]:
        """The fastest way a dataset's bytes can come through this profile: one large object read with N
        connections, or GETs of one sample each with N in flight (only at the sample size measured)."""
        best = (f"remote_large_object_{self.connections}_connections", self.shaped.mb_per_s_n)
        if sample_bytes == self.sample_bytes:
            gets = self.shaped.gets_sample_n * sample_bytes / 1e6
            if gets > best[1]:
                best = (f"remote_sample_gets_{self.connections}_connections", gets)
        return best

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: object) -> RemoteLimits:
        entry = dict(mapping(data, "remote limits entry"))
        for part in ("shaped", "unshaped"):
            if entry.get(part) is not None:
                entry[part] = parsed(RemoteRates, mapping(entry[part], f"remote limits {part}"))
        return parsed(cls, entry)


def remote_limits_key(hostname: str, endpoint: str, latency_ms: float | None, mb_per_s: float | None) -> str:
    """iobench's server is keyed by its profile's numbers (any port); another store by its URL alone."""
    if endpoint != LOOPBACK:
        return f"{hostname}:{endpoint}"
    cap = f"{mb_per_s:g}MB/s" if mb_per_s else "uncapped"
    return f"{hostname}:{LOOPBACK}@{latency_ms or 0:g}ms,{cap}"
