"""`iobench limits`, whole: this machine's ceilings measured (kept at their best with `keep_best`) and stored beside the
results, or object storage's (a prepared dataset served by iobench's S3 server through a profile, or the store at an
endpoint). Prints nothing: the command line prints the tables."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from iobench.errors import IobenchError
from iobench.events import Events
from iobench.results.ceilings import MachineLimits, RemoteLimits


def machine_limits(
    data_dir: Path,
    device: str,
    results: Path,
    probe_size: str,
    read_limit: float | None,
    keep_best: bool,
    events: Events,
) -> tuple[MachineLimits, Path]:
    """This machine's ceilings, measured with a probe of `probe_size` in `data_dir` (under the read throttle), and
    where they were stored."""
    from iobench.loaders.device import resolve_device
    from iobench.measuring.machine_ceilings import best_of, load_limits, measure_limits, save_limits
    from iobench.results.store import check_writable, limits_path
    from iobench.storage.local.confine import check_read_limit
    from iobench.units import parse_bytes

    probe = parse_bytes(probe_size)
    check_read_limit(read_limit)
    target = resolve_device(device)
    check_writable(limits_path(results), records=False)
    limits = measure_limits(data_dir, target, probe, events=events, read_limit=read_limit)
    stored = load_limits(results, data_dir, read_limit) if keep_best else None
    if stored is not None:
        limits = best_of(stored, limits)
    return limits, save_limits(results, data_dir, limits)


def store_limits(
    data_dir: Path,
    dataset: str | None,
    results: Path,
    remote: str | None,
    endpoint_url: str | None,
    latency_ms: float | None,
    connection_mb_per_s: float | None,
    connections: int,
    say: Callable[[str], None],
) -> tuple[RemoteLimits, Path]:
    """Object storage's ceilings: GETs/s and MB/s with one connection and with `connections`, and where they were
    stored."""
    from iobench.data.manifest import find_run_dataset
    from iobench.measuring.object_store_ceilings import find_probes, measure_remote_limits, save_remote_limits
    from iobench.results.store import check_writable, remote_limits_path
    from iobench.storage.remote.profiles import profile

    if remote is not None and endpoint_url is not None:
        raise IobenchError("--endpoint-url measures a store as it is: not with --remote (iobench's own)")
    if endpoint_url is not None and (latency_ms is not None or connection_mb_per_s is not None):
        raise IobenchError("--latency-ms and --connection-mb-per-s shape --remote: not with --endpoint-url")
    chosen = profile(remote, latency_ms, connection_mb_per_s) if remote is not None else None
    check_writable(remote_limits_path(results), records=False)
    folder = find_run_dataset(data_dir, dataset)
    if folder is None:
        raise IobenchError(f"no prepared dataset in {data_dir}; run `iobench prepare` first")
    try:
        limits = measure_remote_limits(find_probes(folder), chosen, endpoint_url, connections, say)
    except OSError as exc:  # a refused key, a missing bucket, a store gone mid-measurement: obstore's, worded
        raise IobenchError(f"limits: {exc}") from None
    return limits, save_remote_limits(results, limits)
