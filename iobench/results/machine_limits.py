"""The ceilings of one host and data device (`iobench limits`) as stored beside the results, and a run's
share of one."""

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
