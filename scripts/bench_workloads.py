#!/usr/bin/env python
"""Benchmark the real-workload paths (issue 12) and print what was measured.

Goals: `prepare --from` a 2 GB .npy takes at most 1.5x `prepare` of a generated dataset of the same
spec, with a peak RSS under 1 GiB; the `files` format writes at least 20,000 small-image samples/s;
with `--transform augment` on small-image the per-sample cost is reported and the DataLoader with 2
workers is compared with 0 workers in one sweep. Generated and --from prepares alternate (disks
drift), and each figure is the median of the repeats.

    python scripts/bench_workloads.py --data-dir /path/on/the/disk [--gb 2] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_prepare import Timed, timed_iobench  # scripts/ is on sys.path when a script runs
from workdir import remove_tree, remove_work, work_dir


def iobench(*args: object) -> Timed:
    """Run `iobench ARGS` in a child, which must succeed."""
    timed = timed_iobench(list(args), quiet=True)
    if timed.code != 0:
        raise SystemExit(f"iobench {' '.join(map(str, args))} failed with {timed.code}")
    return timed


def write_source(path: Path, n: int) -> None:
    """A .npy of n rows of 128 float32 and its labels, written by a child process: Linux carries a
    process's peak RSS across fork and exec, so writing 2 GB here would be counted in every prepare
    measured afterwards (seen: 2,313 MiB for both kinds of prepare)."""
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import bench_workloads as b; "
    code += f"b.write_source_here({str(path)!r}, {n})"
    subprocess.run([sys.executable, "-c", code], check=True)


def write_source_here(path: str | Path, n: int) -> None:
    path = Path(path)
    rng = np.random.default_rng(7)
    features = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, 128))
    for start in range(0, n, 2**20):
        stop = min(start + 2**20, n)
        features[start:stop] = rng.random((stop - start, 128), dtype=np.float32)
    features.flush()
    del features
    np.save(path.with_name("labels.npy"), rng.integers(0, 1000, n))


def prepare_pair(data: Path, n: int, repeats: int) -> None:
    source = data / "source.npy"
    write_source(source, n)
    times: dict[str, list[float]] = {"generated": [], "from": []}
    rss: dict[str, int] = {"generated": 0, "from": 0}
    labels = source.with_name("labels.npy")
    for _ in range(repeats):
        for kind in ("generated", "from"):
            out = data / kind
            remove_tree(out)
            args = ["--size", n] if kind == "generated" else ["--from", source, "--labels", labels]
            seconds, peak, *_ = iobench("prepare", *args, "--data-dir", out, "-q")
            times[kind].append(seconds)
            rss[kind] = max(rss[kind], peak)
    gen, src = statistics.median(times["generated"]), statistics.median(times["from"])
    gb = n * 520 / 1e9
    print(f"prepare, 4 formats of {gb:.2f} GB each ({n:,} samples of 128 float32), {repeats} alternating repeats:")
    print(f"  generated: {gen:6.1f} s  (runs {', '.join(f'{t:.1f}' for t in times['generated'])})")
    print(f"  --from:    {src:6.1f} s  (runs {', '.join(f'{t:.1f}' for t in times['from'])})")
    print(f"  ratio --from / generated: {src / gen:.2f}x (goal <= 1.5x)")
    for kind in ("generated", "from"):
        print(f"  peak RSS, {kind}: {rss[kind] / 2**20:,.0f} MiB (goal for --from < 1024 MiB)")
    remove_tree(data / "generated")
    remove_tree(data / "from")
    source.unlink()
    source.with_name("labels.npy").unlink()


def files_writing(data: Path, n: int, repeats: int) -> None:
    """prepare --formats files, and beside it the two costs it is made of, each on its own: encoding
    (no files) and creating files of the same size (no encoding). 20,000 samples/s on C cores leaves
    C * 50 µs of CPU per sample for everything."""
    cores = len(os.sched_getaffinity(0))
    print(f"files, small-image, {n:,} samples, {cores} cores, {repeats} repeats (file systems drift):")
    for repeat in range(repeats):
        out = data / "files"
        remove_tree(out)
        os.sync()
        args = ["--workload", "small-image", "--size", n, "--formats", "files", "--data-dir", out, "-q"]
        timed = iobench("prepare", *args)
        (manifest,) = out.glob("*/manifest.json")
        entry = json.loads(manifest.read_text())["formats"]["files"]
        per = 1e6 / n
        user, kernel = (timed.cpu - timed.system) * per, timed.system * per
        print(
            f"  [{repeat + 1}] writing (encode, write, hash): {n / entry['write_seconds']:,.0f} samples/s"
            f" (goal >= 20,000); whole prepare {n / timed.seconds:,.0f} samples/s;"
            f" CPU per sample {user:.0f} µs user + {kernel:.0f} µs kernel"
        )
        mean_file = entry["bytes"] / n
        encode = encode_only(n)
        files, kernel = create_files(data / "create", n, int(mean_file))
        print(
            f"      encode only, {cores} threads: {encode:,.0f} samples/s;"
            f" create+write of {mean_file:,.0f}-byte files, 1 thread: {files:,.0f} files/s, {kernel:.0f} µs kernel each"
        )
    remove_tree(data / "files")


def encode_only(n: int) -> float:
    """Samples/s of the files writer's PNG encode on a thread per core, nothing written."""
    from concurrent.futures import ThreadPoolExecutor

    from iobench.data.dataset import generate
    from iobench.formats.png import encode_png
    from iobench.spec import DatasetSpec

    features = np.concatenate([c.features for c in generate(DatasetSpec(n, (3, 32, 32), "uint8", content="photo"))])
    slices = [features[i : i + 64] for i in range(0, n, 64)]
    with ThreadPoolExecutor(len(os.sched_getaffinity(0))) as pool:
        t = time.perf_counter()
        list(pool.map(lambda s: encode_png(s, "chw"), slices))
        return n / (time.perf_counter() - t)


def create_files(folder: Path, n: int, size: int) -> tuple[float, float]:
    """Files/s and kernel µs per file of creating n files of `size` bytes in folders of 1,000."""
    remove_tree(folder)
    os.sync()
    for k in range(0, n, 1000):
        (folder / str(k // 1000)).mkdir(parents=True)
    data = os.urandom(size)
    before, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for i in range(n):
        fd = os.open(folder / str(i // 1000) / f"{i}.png", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, data)
        os.close(fd)
    seconds, after = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF)
    remove_tree(folder)
    return n / seconds, (after.ru_stime - before.ru_stime) / n * 1e6


def transform_workers(data: Path, n: int) -> None:
    out = data / "augment"
    remove_tree(out)
    iobench("prepare", "--workload", "small-image", "--size", n, "--formats", "npy,files", "--data-dir", out, "-q")
    results = out / "sweep.jsonl"
    iobench(
        "sweep",
        "--data-dir",
        out,
        "--format",
        "npy,files",
        "--loader",
        "dataloader",
        "--num-workers",
        "0,2",
        "--transform",
        "augment",
        "--runs",
        "3",
        "--device",
        "cpu",
        "--results",
        results,
        "-q",
    )
    print(f"--transform augment, small-image, {n:,} samples, warm, shuffled, DataLoader, one sweep:")
    print(f"  {'format':<7} {'workers':>7} {'samples/s':>10} {'transform µs/sample':>20}")
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    rates = {}
    for r in rows:
        rates[(r["format"], r["num_workers"])] = r["samples_per_s"]
        cost = r["transform_us_per_sample"]
        print(f"  {r['format']:<7} {r['num_workers']:>7} {r['samples_per_s']:>10,.0f} {cost:>20.0f}")
    for fmt in ("npy", "files"):
        if (fmt, 0) in rates and (fmt, 2) in rates:
            print(f"  {fmt}: 2 workers / 0 workers = {rates[(fmt, 2)] / rates[(fmt, 0)]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, help="the scratch folder (default: a fresh temporary folder)")
    parser.add_argument("--gb", type=float, default=2.0, help="size of the --from source (GB)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--files-samples", type=int, default=100_000)
    parser.add_argument("--augment-samples", type=int, default=20_000)
    parser.add_argument("--parts", default="prepare,files,augment", help="which measurements, comma list")
    args = parser.parse_args()
    parts = args.parts.split(",")
    args.data_dir = work_dir(args.data_dir, "bench-workloads-")
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, {platform.processor() or platform.machine()}")
    try:
        if "prepare" in parts:
            prepare_pair(args.data_dir, int(args.gb * 1e9 / 512), args.repeats)
        if "files" in parts:
            files_writing(args.data_dir, args.files_samples, args.repeats)
        if "augment" in parts:
            transform_workers(args.data_dir, args.augment_samples)
    finally:
        remove_work(args.data_dir)


if __name__ == "__main__":
    main()
