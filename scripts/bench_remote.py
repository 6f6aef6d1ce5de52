"""The object-storage emulator's fidelity, and the remote reference reader against its profile.

Fidelity, per profile (none, express-like, s3-like), with obstore against iobench's own server and shaper:
the first-byte latency one connection sees (median and p99 of 4 KiB ranged GETs, minus the unshaped median),
one connection's bandwidth on a whole object against the profile's cap, and how many small GETs per second the
emulator serves with 64 in flight (its capacity on this machine: above it the profile is not what a run gets).
Then `iobench run --remote` of npy, shuffled and in order, per profile, beside the local run: samples/s,
requests and bytes moved per epoch, the server's CPU. Prints tables; nothing is asserted.

Usage: python scripts/bench_remote.py DATASET_DIR [--profiles none,express-like,s3-like] [--runs 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from iobench.storage.remote import ObjectStorage, RemoteTarget
from iobench.storage.remote.emulator import Emulator
from iobench.storage.remote.profiles import profile


def fidelity(dataset: Path, name: str) -> dict:
    import obstore

    chosen = profile(name)
    emulator = Emulator(dataset.parent, chosen)
    with emulator as endpoint:
        storage = ObjectStorage(RemoteTarget(endpoint, chosen), dataset.name, "npy", [])
        store, key = storage.store(), storage.key("features.npy")
        size = obstore.head(store, key)["size"]
        obstore.get_range(store, key, start=0, length=4096)
        times = []
        for k in range(200):
            started = time.perf_counter()
            obstore.get_range(store, key, start=(k * 4096) % (size - 4096), length=4096)
            times.append(time.perf_counter() - started)
        times.sort()
        started = time.perf_counter()
        whole = len(bytes(obstore.get(store, key).bytes()))
        one_connection = whole / (time.perf_counter() - started) / 1e6
        small = 4000

        async def many() -> None:
            gate = asyncio.Semaphore(64)

            async def one(k: int) -> None:
                async with gate:
                    await obstore.get_range_async(store, key, start=(k * 520) % (size - 520), length=520)

            await asyncio.gather(*(one(k) for k in range(small)))

        cpu = emulator.server_cpu_seconds()
        started = time.perf_counter()
        asyncio.run(many())
        seconds = time.perf_counter() - started
        return {
            "median_ms": times[len(times) // 2] * 1000,
            "p99_ms": times[int(len(times) * 0.99)] * 1000,
            "mb_per_s_one_connection": one_connection,
            "object_mb": whole / 1e6,
            "gets_per_s_64": small / seconds,
            "server_cpu_per_get_ms": (emulator.server_cpu_seconds() - cpu) / small * 1000,
            "cap": chosen.connection_mb_per_s,
            "latency": chosen.latency_ms,
        }


def run(dataset: Path, results: Path, *options: str) -> dict:
    results.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "iobench",
        "run",
        "--data-dir",
        str(dataset.parent),
        "--dataset",
        dataset.name,
        "--format",
        "npy",
        "--loader",
        "dataloader",
        "--device",
        "cpu",
        "-q",
        "--results",
        str(results),
    ]
    cmd += options
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    (record,) = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path, help="a prepared dataset folder with the npy format")
    parser.add_argument("--profiles", default="none,express-like,s3-like")
    parser.add_argument("--runs", default="1")
    args = parser.parse_args()
    names = args.profiles.split(",")
    load = os.getloadavg()[0]
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, load {load:.2f}; dataset {args.dataset.name}")
    print("\nfidelity (obstore, one connection unless said)")
    print(
        "| profile | first byte median / p99 ms | added over none (asked) | one connection MB/s (cap) "
        "| 520 B GETs/s, 64 in flight | server+shaper CPU ms per GET |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    base = None
    for name in names:
        f = fidelity(args.dataset, name)
        base = f["median_ms"] if base is None else base
        cap = f"{f['cap']:g}" if f["cap"] else "none"
        print(
            f"| {name} | {f['median_ms']:.2f} / {f['p99_ms']:.2f} | {f['median_ms'] - base:+.2f} ({f['latency']:g}) "
            f"| {f['mb_per_s_one_connection']:.1f} ({cap}) | {f['gets_per_s_64']:,.0f} "
            f"| {f['server_cpu_per_get_ms']:.3f} |",
            flush=True,
        )
    print("\nnpy through the DataLoader (batch 1024, no workers), one warm-up and one timed epoch per run")
    print("| storage | order | samples/s | MB/s | requests/epoch | bytes moved per byte | server CPU s | epoch s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "r.jsonl"
        for order in ("--shuffle", "--no-shuffle"):
            for name in ["local", *names]:
                remote = [] if name == "local" else ["--remote", name]
                r = run(args.dataset, results, "--runs", args.runs, order, *remote)
                moved = (
                    statistics.median(x for x in r["device_read_bytes"] if x is not None)
                    if any(x is not None for x in r["device_read_bytes"])
                    else float("nan")
                )
                requests = statistics.median(r["requests"]) if r.get("requests") else float("nan")
                print(
                    f"| {name} | {r['order']} | {r['samples_per_s']:,.0f} | {r['mb_per_s']:,.1f} | {requests:,.0f} "
                    f"| {moved / r['dataset_bytes']:.2f} | {r.get('server_cpu_seconds') or 0:.1f} "
                    f"| {r['epoch_seconds_median']:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
