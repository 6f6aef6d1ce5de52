"""`iobench limits`, whole: this machine's ceilings measured (kept at their best with `keep_best`) and stored beside the
results, or object storage's (a prepared dataset served by iobench's S3 server through a profile, or the store at an
endpoint). Prints nothing: the command line prints the tables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from iobench.errors import IobenchError
from iobench.events import Events
from iobench.plan.place import RunPlace
from iobench.results.limits import MachineLimits, RemoteLimits


@dataclass(frozen=True)
class LimitsRequest:
    """Where (the place: the data folder, the device, object storage), how large a probe, the read throttle, whether
    the stored best is kept, and the connections of object storage's 'N connections' figures."""

    place: RunPlace
    probe_size: str = "1G"
    read_limit: float | None = None
    keep_best: bool = False
    connections: int = 16


@dataclass(frozen=True)
class LimitsOutcome:
    limits: MachineLimits | RemoteLimits
    stored: Path  # where they were stored


def limits_session(request: LimitsRequest, events: Events) -> LimitsOutcome:
    """Object storage's ceilings where the place reads it, else this machine's."""
    where = request.place
    if where.object_storage:
        return store_limits(request, events)
    if where.dataset is not None:
        raise IobenchError("--dataset goes with --remote or --endpoint-url")
    return machine_limits(request, events)


def machine_limits(request: LimitsRequest, events: Events) -> LimitsOutcome:
    """This machine's ceilings, measured with a probe of `probe_size` in the data folder (under the read throttle)."""
    from iobench.loaders.device import resolve_device
    from iobench.measuring.machine_limits import best_of, load_limits, measure_limits, save_limits
    from iobench.results.store import check_writable, limits_path
    from iobench.storage.local.confine import check_read_limit
    from iobench.units import parse_bytes

    where, read_limit = request.place, request.read_limit
    probe = parse_bytes(request.probe_size, "--probe-size")
    check_read_limit(read_limit)
    target = resolve_device(where.device)
    check_writable(limits_path(where.results), records=False)
    limits = measure_limits(where.data_dir, target, probe, events=events, read_limit=read_limit)
    stored = load_limits(where.results, where.data_dir, read_limit) if request.keep_best else None
    if stored is not None:
        limits = best_of(stored, limits)
    return LimitsOutcome(limits, save_limits(where.results, where.data_dir, limits))


def store_limits(request: LimitsRequest, events: Events) -> LimitsOutcome:
    """Object storage's ceilings: GETs/s and MB/s with one connection and with `connections`."""
    from iobench.data.manifest import find_run_dataset
    from iobench.measuring.object_store_limits import find_probes, measure_remote_limits, save_remote_limits
    from iobench.results.store import check_writable, remote_limits_path

    where = request.place
    check_writable(remote_limits_path(where.results), records=False)
    folder = find_run_dataset(where.data_dir, where.dataset)
    if folder is None:
        raise IobenchError(f"no prepared dataset in {where.data_dir}; run `iobench prepare` first")
    try:
        limits = measure_remote_limits(
            find_probes(folder), where.remote, where.endpoint_url, request.connections, events
        )
    except OSError as exc:  # a refused key, a missing bucket, a store gone mid-measurement: obstore's, worded
        raise IobenchError(f"limits: {exc}") from None
    return LimitsOutcome(limits, save_remote_limits(where.results, limits))
