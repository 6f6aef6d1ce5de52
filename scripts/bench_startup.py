"""How long the command line takes to answer when it has nothing to measure: `--help`, an argument error,
an unwritable --results. Goals: the first two under 0.5 s, the refusal under 1 s. Prints, asserts nothing.

    python scripts/bench_startup.py [--repeats 5]    (from a checkout: it times that checkout)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path.cwd()  # a checkout: `python -m iobench` runs its iobench


def timed(args: list[str], repeats: int) -> tuple[float, float, int]:
    seconds = []
    code = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "iobench", *args], capture_output=True, cwd=ROOT)
        seconds.append(time.perf_counter() - t0)
        code = done.returncode
    return statistics.median(seconds), max(seconds), code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    with tempfile.TemporaryDirectory() as tmp:
        blocked = Path(tmp) / "not-a-folder"
        blocked.write_text("a file where the results folder should be")
        cases = {
            "iobench --help": (["--help"], 0.5),
            "iobench run --help": (["run", "--help"], 0.5),
            "iobench run --batch-size abc": (["run", "--batch-size", "abc"], 0.5),
            "iobench run --results <unwritable>": (["run", "--results", str(blocked / "r.jsonl")], 1.0),
        }
        print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores, {sys.executable}")
        print(f"{'command':<40} {'median s':>9} {'max s':>7} {'goal s':>7} {'exit':>5}")
        for name, (args, goal) in cases.items():
            median, worst, code = timed(args, repeats)
            print(f"{name:<40} {median:9.3f} {worst:7.3f} {goal:7.1f} {code:5d}")


if __name__ == "__main__":
    main()
