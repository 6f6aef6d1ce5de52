"""Object storage's ceilings under a profile (`iobench limits --remote`), which no loader reading that store
can beat: GETs per second at the dataset's sample size and at 4 KiB, and MB/s of its largest object read in
ranges, with one connection and with N (one request in flight per connection).

Measured with obstore's async client, the fastest client iobench has (no Python per byte, requests in flight
without threads), on the dataset's largest prepared file as its object. Through the profile, then, for
iobench's own server, through a server without the shaper: what the emulator delivers on this machine, so that
a profile asking more than that (16 connections x 90 MB/s is 1.44 GB/s) is said, not silently not met.
Runs in its own command: obstore's runtime in a process that later forks DataLoader workers would hang them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import platform
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from iobench.errors import IobenchError
from iobench.events import QUIET, Events
from iobench.measuring.machine_limits import save_entry
from iobench.results.limits import LOOPBACK, RemoteLimits, RemoteRates, remote_limits_key
from iobench.results.store import load_all_remote_limits, remote_limits_path
from iobench.storage.remote import ObjectStorage, RemoteTarget
from iobench.storage.remote.profiles import PROFILES, Profile

DEFAULT_CONNECTIONS = 16
MAX_CONNECTIONS = 256
WINDOW_S = 1.5  # each rate is the requests (or bytes) of this long, with every connection busy
SMALL = 4096
PART_ONE = 64 * 2**20  # one connection's range per GET: large enough that the first byte's wait is small beside it
PART_MANY = 16 * 2**20  # each of N connections' ranges: several rounds fit in a window


@dataclass(frozen=True)
class Probe:
    """The object the ceilings read: the dataset's largest prepared file, at bucket/key."""

    served: Path  # the folder whose sub-folders are buckets (a dataset's parent)
    bucket: str
    prefix: str  # the format's folder
    name: str
    size: int
    sample_bytes: int


def find_probes(dataset_dir: Path) -> list[Probe]:
    """Each prepared format's largest file, largest first: a store named by --endpoint-url holds only the formats
    uploaded there, so the ceilings read the first of these it has."""
    from iobench.data.manifest import Manifest

    manifest = Manifest.load(dataset_dir)
    largest = []
    for entry in manifest.formats.values():
        top = [f for f in entry.files if "/" not in f.path]  # a format's own folder: one level of keys
        if top:
            largest.append((entry.directory, max(top, key=lambda f: f.bytes)))
    if not largest:
        raise IobenchError(f"{dataset_dir} holds no prepared format to read; run `iobench prepare` first")
    largest.sort(key=lambda pair: pair[1].bytes, reverse=True)
    sample = manifest.spec.sample_bytes
    return [Probe(dataset_dir.parent, dataset_dir.name, folder, f.path, f.bytes, sample) for folder, f in largest]


def _first_stored(probes: list[Probe], target: RemoteTarget) -> Probe:
    """The largest probe object the store has (a HEAD each, one per format at most)."""
    import obstore

    from iobench.storage.remote.client_errors import worded

    for probe in probes:
        storage = ObjectStorage(target, probe.bucket, probe.prefix, [probe.name])
        with worded(storage.url(probe.name)):  # a refused key, a missing bucket, no server: one line
            try:
                obstore.head(storage.store(), storage.key(probe.name))
                return probe
            except Exception as exc:  # obstore's exception classes vary by release
                if not isinstance(exc, FileNotFoundError) and type(exc).__name__ != "NotFoundError":
                    raise
    first = probes[0]
    keyed = first.prefix.rpartition("/")[0]  # the dataset's name, in a bucket the URL names
    where = f"s3://{first.bucket}/" + (f"{keyed}/" if keyed else "")
    formats = ", ".join(p.prefix.rpartition("/")[2] for p in probes)
    raise IobenchError(
        f"none of the dataset's formats ({formats}) is at {where} at {target.endpoint.url}: "
        "`iobench upload --endpoint-url URL` puts them there"
    )


def target_key(target: RemoteTarget) -> str:
    """The stored entry a run against this target is held to."""
    profile = target.profile
    if profile is None:
        return remote_limits_key(platform.node(), target.endpoint.url, None, None)
    return remote_limits_key(platform.node(), LOOPBACK, profile.latency_ms, profile.connection_mb_per_s)


def stored_remote_limits(results: Path, target: RemoteTarget) -> RemoteLimits | None:
    return load_all_remote_limits(results).get(target_key(target))


def save_remote_limits(results: Path, limits: RemoteLimits) -> Path:
    return save_entry(remote_limits_path(results), lambda: load_all_remote_limits(results), limits.key, limits)


def measure_remote_limits(
    probes: list[Probe],
    profile: Profile | None,
    endpoint_url: str | None = None,
    connections: int = DEFAULT_CONNECTIONS,
    events: Events = QUIET,
) -> RemoteLimits:
    """Through the profile (iobench's server) or the store at endpoint_url as it is; for iobench's server, also
    without the shaper. The object read is the first of `probes` (find_probes) the server holds."""
    from iobench.storage.remote.endpoint import store_at

    if not 1 <= connections <= MAX_CONNECTIONS:
        raise IobenchError(f"--connections {connections}: expected 1 to {MAX_CONNECTIONS}")
    unshaped = None
    if endpoint_url is not None:
        profile = None  # a store iobench did not start is measured as it is
        endpoint = store_at(endpoint_url)
        endpoint_url = endpoint.url  # the store's entry, whichever of its buckets held the probe
        target = RemoteTarget(endpoint, None)
        probe = _first_stored(
            [
                replace(p, bucket=endpoint.bucket_for(p.bucket), prefix=endpoint.prefix_for(p.bucket) + p.prefix)
                for p in probes
            ],
            target,
        )
        events.say(f"reading s3://{probe.bucket}/{probe.prefix}/{probe.name} at {endpoint_url} ...")
        shaped = _rates(target, probe, connections)
    else:
        probe = probes[0]
        if profile is None:
            raise IobenchError("iobench limits needs --remote PROFILE or --endpoint-url for object storage")
        events.say(f"through {profile.describe()} ...")
        shaped = _served_rates(probe, profile, connections)
        if profile.shaped:
            events.say("through the server alone (no shaper) ...")
            unshaped = _served_rates(probe, PROFILES["none"], connections)
    return RemoteLimits(
        measured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        hostname=platform.node(),
        endpoint=endpoint_url.rstrip("/") if endpoint_url is not None else LOOPBACK,
        profile=profile.name if profile is not None else "external",
        latency_ms=profile.latency_ms if profile is not None else None,
        connection_mb_per_s=profile.connection_mb_per_s if profile is not None else None,
        connections=connections,
        probe_object=f"{probe.bucket}/{probe.prefix}/{probe.name}",
        probe_bytes=probe.size,
        sample_bytes=probe.sample_bytes,
        shaped=shaped,
        unshaped=unshaped,
    )


def _served_rates(probe: Probe, profile: Profile, connections: int) -> RemoteRates:
    from iobench.storage.remote.emulator import Emulator

    served = [f"{probe.bucket}/{probe.prefix}/{probe.name}"]
    with Emulator(probe.served, profile, served=served) as endpoint:
        return _rates(RemoteTarget(endpoint, profile, served=probe.served), probe, connections)


def _rates(target: RemoteTarget, probe: Probe, connections: int) -> RemoteRates:
    from iobench.storage.remote.client_errors import worded

    storage = ObjectStorage(target, probe.bucket, probe.prefix, [probe.name])
    storage.make_cold()  # the server's file read through: its disk never adds to the profile
    store, key = storage.store(), storage.key(probe.name)
    sample = min(max(probe.sample_bytes, 1), probe.size)
    with worded(target.endpoint.url):
        return asyncio.run(_all_rates(store, key, probe.size, sample, connections))


async def _all_rates(store: object, key: str, size: int, sample: int, connections: int) -> RemoteRates:
    gets_sample_1, _ = await _gets(store, key, size, sample, 1)
    gets_sample_n, _ = await _gets(store, key, size, sample, connections)
    gets_4k_1, first_byte = await _gets(store, key, size, min(SMALL, size), 1)
    gets_4k_n, _ = await _gets(store, key, size, min(SMALL, size), connections)
    return RemoteRates(
        gets_sample_1=gets_sample_1,
        gets_sample_n=gets_sample_n,
        gets_4k_1=gets_4k_1,
        gets_4k_n=gets_4k_n,
        first_byte_ms=first_byte * 1000,
        mb_per_s_1=await _bulk(store, key, size, 1, min(PART_ONE, size)),
        mb_per_s_n=await _bulk(store, key, size, connections, min(PART_MANY, size)),
    )


async def _bulk(store: object, key: str, size: int, connections: int, part: int) -> float:
    """MB/s of the object read in ranges of `part` bytes, with `connections` ranges in flight."""
    gets, _ = await _gets(store, key, size, part, connections)
    return gets * part / 1e6


async def _busy(connections: int, request: Callable[[random.Random], object]) -> tuple[float, list[float]]:
    """`connections` loops, each one request in flight, for WINDOW_S after one request each has warmed its
    connection: the seconds it took and each request's seconds."""
    rngs = [random.Random(k) for k in range(connections)]
    await asyncio.gather(*(request(rng) for rng in rngs))  # type: ignore[misc]
    times: list[float] = []
    deadline = time.perf_counter() + WINDOW_S

    async def loop(rng: random.Random) -> None:
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            await request(rng)  # type: ignore[misc]
            times.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(loop(rng) for rng in rngs))
    return time.perf_counter() - began, times


async def _gets(store: object, key: str, size: int, length: int, connections: int) -> tuple[float, float]:
    """GETs per second of `length` bytes at random offsets, and the median GET's seconds."""
    import obstore

    def request(rng: random.Random) -> object:
        return obstore.get_range_async(store, key, start=rng.randrange(size - length + 1), length=length)

    seconds, times = await _busy(connections, request)
    return len(times) / seconds, statistics.median(times)
