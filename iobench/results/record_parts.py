"""The parts of a record that say where and how a run ran rather than what it timed: its ranks, the system
meanwhile (cache, storage reads or requests, CPU, memory) and the environment (versions, machine)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class RankStats:
    """How the ranks shared the work (one rank outside torchrun)."""

    nodes: int = 1
    hosts: list[str] = field(default_factory=list)
    shard: str | None = None
    rank_epoch_seconds: list[list[float]] = field(default_factory=list)
    rank_samples_per_s: list[float] = field(default_factory=list)
    rank_mb_per_s_min: float | None = None
    rank_mb_per_s_max: float | None = None
    straggler_ratio: float = 1.0
    # each rank's share of each timed epoch spent in the step (its utilisation, AU): `feed` judges every rank's
    rank_au: list[list[float]] = field(default_factory=list)
    # the same as DLIO counts it (MLPerf Storage's number): each epoch's first step left out, its wait for the first
    # batch and its compute (the step's time over its batches); empty in records made before 0.3.2
    rank_au_after_first: list[list[float]] = field(default_factory=list)
    # each rank's step loop's wait for a CPU per timed epoch, a share of its epoch (runnable, not running: time the
    # loop lost to busy cores); empty before 0.3.3 or where the kernel keeps no schedstat
    rank_loop_wait: list[list[float]] = field(default_factory=list)
    # each rank's mean DataLoader worker's wait for a CPU per timed epoch, a share of its epoch (0 without workers;
    # empty in records made before it, or where the kernel keeps no schedstat)
    rank_worker_wait: list[list[float]] = field(default_factory=list)
    # each rank's step loop's time on a CPU per timed epoch, a share of its epoch (as rank_worker_wait)
    rank_loop_cpu: list[list[float]] = field(default_factory=list)
    # what the ranks delivered together in the last timed epoch (scored after the clock; none outside torchrun or
    # for an epoch cut short): each rank's samples and batches, samples delivered more than once across ranks
    # (DistributedSampler pads a share by repeating samples) and samples no rank delivered
    rank_samples: list[int] = field(default_factory=list)
    rank_batches: list[int] = field(default_factory=list)
    duplicated_samples: int | None = None
    missing_samples: int | None = None


@dataclass(frozen=True, kw_only=True)
class SystemStats:
    """What the system did meanwhile: cache residency, storage reads, CPU, memory, set-up."""

    eviction_method: str | None = None
    read_method: str | None = None  # how the loader read, where that depends on the machine (direct)
    decoder: str | None = None  # --decode-on device: what decoded the files after the copy, where, which version
    data_block_device: str | None = None
    residency_before: list[float] = field(default_factory=list)
    residency_after: list[float] = field(default_factory=list)
    cold_not_cold: bool = False
    device_read_bytes: list[int | None] = field(default_factory=list)
    process_read_bytes: list[int | None] = field(default_factory=list)
    cpu_utilisation: float | None = None
    cpu_iowait: float | None = None
    peak_rss_bytes: int | None = None
    peak_rss_children_bytes: int | None = None
    cuda_max_memory_allocated_bytes: int | None = None
    cuda_max_memory_reserved_bytes: int | None = None
    setup_seconds: list[float] = field(default_factory=list)
    total_seconds: float | None = None
    cache_budget_bytes: int | None = None  # the budget in bytes (a share resolved against the files)
    cache_peak_bytes: int | None = None  # the most file cache the budgeted group held, polled
    confinement_method: str | None = None  # how the throttle and budget were applied (cgroup files)
    profile_path: str | None = None
    # Schema 3, object storage served by iobench: by the server's access log, per timed epoch and in all
    requests: list[int | None] = field(default_factory=list)
    requests_by_method: dict[str, int] = field(default_factory=dict)
    request_errors: int | None = None  # 4xx and 5xx answers
    request_seconds_median: float | None = None  # the server's time per request, shaping included
    server_cpu_seconds: float | None = None  # the server's and the shaper's CPU over the timed epochs
    # who counted the requests: "server" (iobench's server's access log), "client" (the clients' own counts, for a
    # store iobench does not run: every attempt, retries included), "none (FUSE)"; None before 0.3
    requests_counted_by: str | None = None
    request_retries: int | None = None  # attempts the clients made again (counted by the client)
    # the bytes in the readers' own local cache (LitData's chunk folder) at the end of each timed epoch
    library_cache_bytes: list[int | None] = field(default_factory=list)
    # ... and the most they held during each timed epoch (sampled every 50 ms: an evicting cache's need)
    library_cache_peak_bytes: list[int | None] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Environment:
    """Where it was measured: enough to compare two results and reproduce one."""

    iobench_version: str = ""
    git_sha: str = ""
    python_version: str = ""
    torch_version: str = ""
    tensordict_version: str = ""
    numpy_version: str = ""
    h5py_version: str = ""
    lmdb_version: str = ""
    lz4_version: str = ""
    cpu_model: str = ""
    cpu_count: int | None = None
    torch_threads: int | None = None  # torchrun sets OMP_NUM_THREADS=1 for several processes
    ram_bytes: int = 0
    kernel: str = ""
    hostname: str = ""
    data_filesystem: str = ""
    data_device: str = ""
    gpu_name: str = ""
    cuda_version: str = ""
    # Schema 3: the version of every library on the run's path (distribution -> version), the format's and the
    # loader's included; empty in older records, which name only the six above.
    packages: dict[str, str] = field(default_factory=dict)
