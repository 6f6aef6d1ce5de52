"""DLIO beside `iobench feed`'s runs: the same workload (DLIO's configuration), the same number of samples, the same
number of emulated accelerators, alternating, and their AU and samples/s side by side.

DLIO (argonne-lcf/dlio_benchmark) runs from a venv of its own (`--dlio`: its `dlio_benchmark` entry point; it needs an
MPI's `mpirun`), reading npy files of its own generation with its PyTorch loader; iobench runs `iobench run --nproc N`
with the workload's batch, workers and step, as `feed` does at N. `--records mean` (every record the mean size): DLIO's
npy files of the mean against iobench's npy format; `--records dlio` (unet3d): both draw the sizes as DLIO does (its
record_length_stdev) and hand over DLIO's 2 MiB array, DLIO's npy files against iobench's `prepare --workload unet3d`
files. Both read warm (the dataset is
far under the RAM here: each after a warm-up epoch of its own; DLIO's first epoch is left out of its mean as iobench's
warm-up is). Everything is made in a fresh `mkdtemp` folder (or the --dir given, checked: `workdir`) and removed at
the end.

    python scripts/bench_dlio.py --dlio /opt/dlio/bin/dlio_benchmark --workload unet3d --size 28 --nproc 1 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from workdir import remove_work, work_dir

from iobench.feed.workloads import workload_of
from iobench.results.store import read_records
from iobench.system.children import ChildExit, run_child
from iobench.system.processes import python_module


def _dlio(args: argparse.Namespace, w, data: Path, out: Path, generate: bool, epochs: int) -> dict:
    """One DLIO run (generation or training); its summary.json for training."""
    overrides = [
        f"workload={w.name}_{w.accelerator}",
        f"++workload.workflow.generate_data={generate}",
        f"++workload.workflow.train={not generate}",
        "++workload.workflow.checkpoint=False",
        "++workload.framework=pytorch",
        "++workload.reader.data_loader=pytorch",
        "++workload.dataset.format=npy",
        f"++workload.dataset.data_folder={data}",
        f"++workload.dataset.num_files_train={args.size}",
        "++workload.dataset.num_samples_per_file=1",
        f"++workload.dataset.record_length={w.sample_bytes}",
        # what DLIO's reader hands the training loop: by default a fixed array of record_length_resize bytes (2 MiB
        # for unet3d) whatever it read; `--hand-over whole` makes it the sample's size, as iobench's loaders hand over
        *([f"++workload.dataset.record_length_resize={w.sample_bytes}"] if args.hand_over == "whole" else []),
        f"++workload.dataset.record_length_stdev={w.records.stdev_bytes if args.records == 'dlio' else 0}",
        f"++workload.reader.batch_size={w.batch_size}",
        f"++workload.reader.read_threads={w.read_threads}",
        f"++workload.train.computation_time={w.compute_s}",
        f"++workload.train.epochs={epochs}",
        f"++hydra.run.dir={out}",
    ]
    mpirun = shutil.which("mpirun") or "mpirun"
    argv = [mpirun, "--allow-run-as-root", "-np", str(args.nproc if not generate else 1), args.dlio, *overrides]
    done = _run(argv, args.timeout, "DLIO")
    if done.code != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise SystemExit("DLIO failed: " + " | ".join(tail))
    if generate:
        return {}
    return json.loads((out / "summary.json").read_text())["metric"]


def _run(argv: list[str], timeout_s: float, what: str) -> ChildExit:
    """`argv` in a session of its own, its whole group ended when it exits or runs past `timeout_s` (a DLIO that
    outlived the timeout was left under PID 1, after a TimeoutExpired traceback); past it, one line."""
    try:
        return run_child(argv, timeout_s)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{what} ran past --timeout {timeout_s:g} s (stopped, with everything it started)") from None


def _format(args: argparse.Namespace) -> str:
    return "files" if args.records == "dlio" else "npy"


def _prepare(args: argparse.Namespace, w, data: Path) -> None:
    """iobench's dataset: npy of the mean size, or files of DLIO's sizes (`prepare --workload unet3d`)."""
    if args.records == "dlio":
        spec = ("--workload", w.name, "--size", str(args.size), "--classes", "2")
    else:
        spec = ("--size", str(args.size), "--shape", str(w.sample_bytes), "--dtype", "uint8", "--classes", "2")
    where = ("--formats", _format(args), "--data-dir", str(data), "--dataset", "feed", "--quiet")
    subprocess.run(python_module("iobench", "prepare", *spec, *where), check=True, capture_output=True)


def _iobench(args: argparse.Namespace, w, data: Path, results: Path) -> dict:
    argv = python_module(
        "iobench",
        "run",
        *("--nproc", str(args.nproc), "--format", _format(args), "--loader", "dataloader", "--device", "cpu"),
        *("--data-dir", str(data.parent), "--dataset", data.name),
        *("--batch-size", str(w.batch_size), "--num-workers", str(w.read_threads), "--persistent-workers"),
        *("--step", f"sleep:{w.compute_s * 1000:g}", "--epochs", str(args.epochs - 1), "--warmup", "1"),
        *("--cache", "warm", "--results", str(results), "--quiet"),
    )
    done = _run(argv, args.timeout, "iobench")
    if done.code != 0:
        raise SystemExit("iobench failed: " + ((done.stderr or done.stdout).strip().splitlines() or [""])[-1])
    r = read_records(results)[-1]
    rank_au = [statistics.median(epochs) for epochs in r.ranks.rank_au]
    # DLIO's AU counts each step's wait from the first batch on: the epoch's start (workers starting, the first
    # batch) is outside it; iobench's is the step's share of the whole epoch. Both are printed.
    e = r.epochs
    after_first = [
        au * s / (s - f)
        for au, s, f in zip(r.ranks.rank_au[0], e.epoch_seconds, e.first_batch_seconds, strict=True)
        if s > f
    ]
    return {
        "au": statistics.fmean(rank_au) * 100,
        "au_after_first": statistics.median(after_first) * 100 if after_first else float("nan"),
        "samples_per_s": e.samples_per_s,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dlio", required=True, help="DLIO's dlio_benchmark entry point, in its own venv")
    p.add_argument("--workload", default="unet3d")
    p.add_argument("--accelerator", default="h100")
    p.add_argument("--size", type=int, default=28, help="samples (files), both sides")
    p.add_argument("--nproc", type=int, default=1, help="emulated accelerators, both sides")
    p.add_argument("--epochs", type=int, default=3, help="epochs of each run, the first a warm-up on both sides")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--hand-over",
        choices=("resized", "whole"),
        default="resized",
        help="DLIO's batch: its default, or the whole sample",
    )
    p.add_argument("--records", choices=("mean", "dlio"), default="mean", help="every record the mean, or DLIO's sizes")
    p.add_argument("--dir", type=Path, default=None, help="the work folder (default: a fresh one)")
    p.add_argument("--timeout", type=float, default=1800.0)
    args = p.parse_args()
    w = workload_of(args.workload, args.accelerator)
    if w is None:
        raise SystemExit(f"no DLIO workload {args.workload}/{args.accelerator}")
    if not (1 <= args.size <= 100_000 and 1 <= args.nproc <= 64 and 2 <= args.epochs <= 20 and 1 <= args.rounds <= 20):
        raise SystemExit("--size 1..100000, --nproc 1..64, --epochs 2..20, --rounds 1..20")
    if args.records == "dlio" and (w.records is None or args.hand_over == "whole"):
        raise SystemExit("--records dlio: a workload whose sizes vary (unet3d), handed over as DLIO does (resized)")
    work = work_dir(args.dir, "iobench-dlio-")
    try:
        iob_data = work / "data" / "feed"
        (work / "data").mkdir()
        _prepare(args, w, work / "data")
        dlio_data = work / "dlio-data"
        _dlio(args, w, dlio_data, work / "dlio-gen", True, 1)
        for side, files in (("DLIO", dlio_data / "train"), ("iobench", work / "data" / "feed" / _format(args))):
            sizes = [p.lstat().st_size for p in files.rglob("*.npy") if p.name != "labels.npy"]
            print(
                f"{side}'s {len(sizes)} files: {statistics.fmean(sizes) / 1e6:,.1f} MB mean, stdev "
                f"{statistics.pstdev(sizes) / 1e6:,.1f} MB",
                flush=True,
            )
        print(
            f"{w.key}: {args.size} samples of {w.sample_bytes:,} bytes, batch {w.batch_size}, {w.read_threads} "
            f"workers, step {w.compute_s * 1000:g} ms, {args.nproc} accelerator(s), {args.epochs} epochs (the first a "
            f"warm-up), warm, DLIO handing over {args.hand_over} samples, records {args.records}; host load "
            f"{os.getloadavg()[0]:.2f}",
            flush=True,
        )
        rows = []
        for k in range(args.rounds):
            order = ("dlio", "iobench") if k % 2 == 0 else ("iobench", "dlio")
            got = {}
            for side in order:
                began = time.perf_counter()
                if side == "dlio":
                    m = _dlio(args, w, dlio_data, work / f"dlio-run-{k}", False, args.epochs)
                    aus = m["train_au_percentage"][1:] or m["train_au_percentage"]
                    rates = m["train_throughput_samples_per_second"][1:] or m["train_throughput_samples_per_second"]
                    got[side] = {"au": statistics.fmean(aus), "samples_per_s": statistics.fmean(rates)}
                else:
                    got[side] = _iobench(args, w, iob_data, work / "iobench.jsonl")
                after = got[side].get("au_after_first")
                print(
                    f"round {k + 1} {side}: AU {got[side]['au']:.1f}%"
                    + (f" (after each epoch's first batch, as DLIO counts: {after:.1f}%)" if after is not None else "")
                    + f", {got[side]['samples_per_s']:.2f} samples/s ({time.perf_counter() - began:.0f} s)",
                    flush=True,
                )
            rows.append(got)
        for side in ("dlio", "iobench"):
            aus = [r[side]["au"] for r in rows]
            rates = [r[side]["samples_per_s"] for r in rows]
            print(
                f"{side}: AU {statistics.median(aus):.1f}% [{min(aus):.1f}-{max(aus):.1f}], "
                f"{statistics.median(rates):.2f} samples/s [{min(rates):.2f}-{max(rates):.2f}]"
            )
        for key, words in (("au", "whole epochs"), ("au_after_first", "after each epoch's first batch")):
            diff = [round(r["iobench"][key] - r["dlio"]["au"], 1) for r in rows]
            print(f"AU iobench ({words}) - DLIO, points: median {statistics.median(diff):+.1f}, per round {diff}")
    finally:
        remove_work(work)


if __name__ == "__main__":
    sys.exit(main())
