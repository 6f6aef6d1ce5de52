"""How often `compare` calls noise a change, and how often it finds a real one: N runs of one configuration at spaced
times (each `iobench run` a record of --runs runs), every pair of them judged as `compare` judges (the false-change
rate: any "faster" or "slower" between identical configurations is one), and the same baseline against a planted
1.3x slower configuration (`--transform cpu:US`, a spin of US microseconds a sample chosen from the baseline's own
time a sample, so that each sample takes 1.3x as long; a sleep a batch overshot by a millisecond at random), every
pair of those (the detection rate). Quiet, or beside two busy loops (`--busy 2`: `yes` to
/dev/null, as the issue had it). Also prints how far apart identical configurations drifted (|ratio - 1| of every
pair), what `RUN_DRIFT` rests on.

    python scripts/bench_false_changes.py [--repeats 8] [--gap-s 20] [--size 2e5] [--busy 0|2] [--planted 1.3]
                                          [--keep PREFIX]
    python scripts/bench_false_changes.py --judge PREFIX      (the records a --keep run kept, judged again)

Each `iobench run` is a fresh process, as a user's two runs are; the dataset is prepared once in a fresh folder,
removed at the end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from workdir import remove_work, work_dir

from iobench.judge.change import FASTER, SLOWER, compare_change
from iobench.results.record import RunRecord


def run_once(data: Path, results: Path, transform: str, args: argparse.Namespace) -> RunRecord:
    argv = [
        sys.executable,
        "-m",
        "iobench",
        "run",
        "--format",
        args.format,
        "--loader",
        "dataloader",
        "--num-workers",
        "0",
        "--runs",
        str(args.runs),
        "--epochs",
        str(args.epochs),
        "--device",
        "cpu",
        "--transform",
        transform,
        "--data-dir",
        str(data),
        "--results",
        str(results),
        "-q",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"iobench run failed: {done.stderr.strip()[-500:]}")
    lines = [line for line in results.read_text().splitlines() if line.strip()]
    return RunRecord.from_json(json.loads(lines[-1]))


def sample_us(r: RunRecord) -> float:
    """The baseline's microseconds per sample (a timed epoch's median over its samples)."""
    return r.epochs.epoch_seconds_median / r.epochs.samples_per_epoch * 1e6


def busy_loops(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen(["sh", "-c", "yes > /dev/null"], start_new_session=True) for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=8, help="runs of each configuration")
    parser.add_argument("--gap-s", type=float, default=20.0, help="seconds between two runs")
    parser.add_argument("--size", default="5e5")
    parser.add_argument("--format", default="npy")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--busy", type=int, default=0, help="busy loops beside every run")
    parser.add_argument("--planted", type=float, default=1.3, help="the planted slowdown (0: none)")
    parser.add_argument("--data-dir", type=Path, help="a scratch folder (default: a fresh temporary one)")
    parser.add_argument("--keep", help="keep the records: PREFIX-base.jsonl and PREFIX-planted.jsonl")
    parser.add_argument("--judge", help="judge the records a --keep run kept under PREFIX, measure nothing")
    args = parser.parse_args()
    if args.judge:
        base, planted = (load(Path(f"{args.judge}-{role}.jsonl")) for role in ("base", "planted"))
        report(base, planted, "kept")
        return
    if not 2 <= args.repeats <= 100:
        parser.error("--repeats: 2 to 100")
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    data = work_dir(args.data_dir, "false-changes-")
    loops: list[subprocess.Popen] = []
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "iobench",
                "prepare",
                "--size",
                args.size,
                "--formats",
                args.format,
                "--data-dir",
                str(data),
                "-q",
            ],
            check=True,
            capture_output=True,
        )
        loops = busy_loops(args.busy)
        print(
            f"{cpu}, {os.cpu_count()} cores; {args.busy} busy loops; {args.format} {args.size} samples, "
            f"{args.runs} runs x {args.epochs} epochs a record; {args.repeats} records each, {args.gap_s:g} s apart",
            flush=True,
        )
        base: list[RunRecord] = []
        planted: list[RunRecord] = []
        step = None
        for k in range(args.repeats):
            base.append(run_once(data, data / f"base-{k}.jsonl", "none", args))
            if args.planted and step is None:
                step = f"cpu:{sample_us(base[0]) * (args.planted - 1):.2f}"
            if args.planted:
                planted.append(run_once(data, data / f"planted-{k}.jsonl", step, args))
            said = f", planted {planted[-1].epochs.samples_per_s:,.0f}" if planted else ""
            print(
                f"[{k + 1}/{args.repeats}] load {os.getloadavg()[0]:.2f}: base {base[-1].epochs.samples_per_s:,.0f} "
                f"samples/s (other cores {base[-1].host.busy}){said}",
                flush=True,
            )
            if k + 1 < args.repeats:
                time.sleep(args.gap_s)
        report(base, planted, step)
        if args.keep:
            for role, kept in (("base", base), ("planted", planted)):
                Path(f"{args.keep}-{role}.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in kept))
    finally:
        for loop in loops:
            os.killpg(loop.pid, 15)
            loop.wait()
        remove_work(data)


def load(path: Path) -> list[RunRecord]:
    return [RunRecord.from_json(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def report(base: list[RunRecord], planted: list[RunRecord], step: str | None) -> None:
    pairs = list(itertools.combinations(base, 2))
    verdicts = [compare_change(a, b) for a, b in pairs]
    false = [v for v in verdicts if v.kind in (FASTER, SLOWER)]
    drift = sorted(abs(v.ratio - 1) for v in verdicts if v.ratio is not None)
    kinds = {k: sum(v.kind == k for v in verdicts) for k in dict.fromkeys(v.kind for v in verdicts)}
    print(
        f"\nidentical configurations: {len(pairs)} pairs; called a change: {len(false)} "
        f"({len(false) / len(pairs):.1%}); verdicts {kinds}"
    )
    if drift:
        q = statistics.quantiles(drift, n=20) if len(drift) > 1 else drift
        print(
            f"  |B/A - 1| between identical records: median {statistics.median(drift):.1%}, 95th percentile "
            f"{q[-1]:.1%}, largest {drift[-1]:.1%}"
        )
    if not planted:
        return
    found = [compare_change(a, b) for a, b in itertools.product(base, planted)]
    slower = sum(v.kind == SLOWER for v in found)
    for v in found:
        if v.kind != SLOWER:
            print(f"  not found: {v.text}")
    ratios = [v.ratio for v in found if v.ratio is not None]
    print(
        f"planted ({step}): {len(found)} pairs; found slower: {slower} ({slower / len(found):.1%}); B/A median "
        f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]; verdicts "
        f"{ {k: sum(v.kind == k for v in found) for k in dict.fromkeys(v.kind for v in found)} }"
    )


if __name__ == "__main__":
    main()
