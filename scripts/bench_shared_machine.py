"""Does iobench answer on a shared machine, and is the answer the quiet machine's? The same questions asked quiet and
beside other programs, alternating (quiet, busy, quiet, busy ...): `run`'s default comparison (the README's first
command), a checkpoint comparison (`checkpoint --libraries torch,dcp`, or `--libraries`), `feed` (a custom workload),
and `compare --rerun` (`rerun`: a record against itself, and against a planted 1.2x slower step), and `tune`'s search
(`tune --format npy`, its best settings). Beside: N busy
loops (`--busy N`, `yes` to /dev/null, as the issue had them) or a disk hog (`--busy disk`: 4 KiB O_DIRECT random
reads of a file of its own on the same disk, by fio where it is installed, else by Python threads).

It prints, for each question and condition: how often an answer was given, how often the answer's choice is the quiet
runs' choice where the quiet answer decided one, how far the busy figures are from the quiet ones, and what each run
waited for (its processes' wait share, other programs' cores), with the host's CPU and the load.

    python scripts/bench_shared_machine.py [--trials 5] [--busy 2] [--questions run,checkpoint,feed]
                                           [--device cpu] [--size 2e5] [--dir FOLDER] [--keep RECORDS]

Each question is a fresh `iobench` process, as a user's is; the dataset is prepared once in a fresh folder (or the
given one, checked), removed at the end with everything the script made.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from workdir import remove_work, work_dir

from iobench.system.children import run_child
from iobench.system.processes import python_module
from iobench.system.waits import share_of

ANSWER = "answer"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


@contextmanager
def beside(busy: str, folder: Path):
    """N busy loops, or the disk hog, for the body's duration; nothing for "0"."""
    procs: list[subprocess.Popen] = []
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        if busy == "disk":
            procs, threads = _disk_hog(folder, stop)
        else:
            for _ in range(int(busy)):
                procs.append(subprocess.Popen(["sh", "-c", "exec yes > /dev/null"], start_new_session=True))
        time.sleep(0.5 if procs or threads else 0)
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        for p in procs:
            p.kill()
            p.wait()


def _disk_hog(folder: Path, stop: threading.Event) -> tuple[list[subprocess.Popen], list[threading.Thread]]:
    hog = folder / "disk-hog.bin"
    if not hog.exists():
        with open(hog, "wb") as f:
            for _ in range(256):
                f.write(os.urandom(2**20))
    if shutil.which("fio"):
        argv = ["fio", "--name=hog", f"--filename={hog}", "--rw=randread", "--bs=4k", "--direct=1", "--iodepth=16"]
        argv += ["--ioengine=libaio", "--time_based", "--runtime=3600", "--output=/dev/null"]
        return [subprocess.Popen(argv, start_new_session=True)], []

    def read() -> None:
        import random

        fd = os.open(hog, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
        import mmap

        buf = mmap.mmap(-1, 4096)
        try:
            while not stop.is_set():
                os.preadv(fd, [buf], random.randrange(256 * 256) * 4096)
        finally:
            os.close(fd)

    threads = [threading.Thread(target=read, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    return [], threads


def iobench(args: list[str], timeout_s: float) -> tuple[str, str]:
    done = run_child(python_module("iobench", *args), timeout_s, env={**os.environ, "COLUMNS": "250"})
    if done.code != 0:
        return "", (done.stderr.strip().splitlines() or ["failed"])[-1]
    return done.stdout, done.stderr


def answer_line(stdout: str) -> str:
    return next((line for line in stdout.splitlines() if line.startswith(ANSWER)), "")


def chosen(line: str, question: str) -> str | None:
    """The configuration the answer chose (None: no answer)."""
    if ": none" in line or not line:
        return None
    text = line.split(": ", 1)[1]
    if question == "run":
        return text.removeprefix("use ").split(" (", 1)[0]
    if question == "checkpoint":
        return text.removeprefix("save with ").split(":", 1)[0]
    return text.split(" accelerator", 1)[0].split(" of one", 1)[0]  # feed: N, or a fraction of one


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def run_question(work: Path, args: argparse.Namespace, tag: str) -> dict:
    results = work / f"run-{tag}.jsonl"
    out, err = iobench(
        ["run", "--device", args.device, "--data-dir", str(work / "data"), "--size", args.size, "--results",
         str(results), "-q"], 1800,
    )  # fmt: skip
    line = answer_line(out)
    rs = records(results)
    rates = {f"{r['format']}/{r['loader']}": r["samples_per_s"] for r in rs}
    shares = [_share(r) for r in rs]
    others = [max((x for x in r.get("unit_others_cores", []) if x is not None), default=None) for r in rs]
    pairs = zip(rates.items(), shares, strict=False)
    said = ", ".join(f"{n} {rate:,.0f}/s waited {s:.0%}" for (n, rate), s in pairs if s is not None)
    return {"line": f"{line or err} [{said}]", "choice": chosen(line, "run"), "rates": rates, "shares": shares,
            "others": others}  # fmt: skip


def checkpoint_question(work: Path, args: argparse.Namespace, tag: str) -> dict:
    results = work / f"ck-{tag}.jsonl"
    out, err = iobench(
        ["checkpoint", "--params", args.params, "--libraries", args.libraries, "--rounds", "3", "--dir",
         str(work / "ck"), "--results", str(results), "--device", "cpu", "-q"], 1800,
    )  # fmt: skip
    line = answer_line(out)
    rs = [r for r in records(results) if r.get("op") == "save"]
    rates = {}
    for lib in args.libraries.split(","):
        durable = [r["durable_seconds"] for r in rs if r["library"] == lib and r.get("durable_seconds")]
        if durable:
            rates[lib] = 1 / statistics.median(durable)
    return {"line": line or err, "choice": chosen(line, "checkpoint"), "rates": rates, "shares": [], "others": []}


def feed_question(work: Path, args: argparse.Namespace, tag: str) -> dict:
    results = work / f"feed-{tag}.jsonl"
    out, err = iobench(
        ["feed", "--workload", "custom", "--step-ms", str(args.feed_step_ms), "--batch-size", "64", "--sample-bytes",
         "100000", "--size", str(args.feed_size), "--max-accelerators", str(args.feed_most), "--num-workers", "1",
         "--epochs", "2", "--cache", "warm",
         "--data-dir", str(work / "data"), "--results", str(results), "-q"], 1800,
    )  # fmt: skip
    line = answer_line(out)
    return {"line": line or err, "choice": chosen(line, "feed"), "rates": {}, "shares": [], "others": []}


def tune_question(work: Path, args: argparse.Namespace, tag: str) -> dict:
    results, data = work / f"tune-{tag}.jsonl", work / "tune-data"
    if not data.exists():  # prepared once, before the first trial's clock
        iobench(["prepare", "--size", args.size, "--formats", "npy", "--data-dir", str(data), "-q"], 1800)
    dataset = next((d.name for d in data.iterdir() if d.is_dir()), "") if data.exists() else ""
    out, err = iobench(
        ["tune", "--format", "npy", "--device", args.device, "--data-dir", str(data), "--dataset", dataset,
         "--budget-minutes", str(args.tune_minutes), "--results", str(results), "-q"], 1800,
    )  # fmt: skip
    line = next((x for x in out.splitlines() if x.startswith("best: ")), "")
    # the best measured, named where its interval is apart from the next's: an answer; still overlapping, none
    decided = line and "still overlapping" not in line
    choice = line.removeprefix("best: ").split(": ", 1)[0] if decided else None
    return {"line": line or err, "choice": choice, "rates": {}, "shares": [], "others": []}


def _rerun_records(work: Path, args: argparse.Namespace) -> tuple[Path, Path]:
    """A (npy, batches of 8192) and B, A with a sleep step planted so that B is about 1.2x slower, measured once
    quiet. A sleep costs a fixed overhead beyond what it asks (about 0.25 ms here), so the sleep is found by a few
    reruns of the two: the time each batch gained, less the sleep asked, is that overhead."""
    a, b = work / "rerun-a.jsonl", work / "rerun-b.jsonl"
    if b.exists():
        return a, b
    base = ["run", "--device", args.device, "--data-dir", str(work / "data"), "--size", args.size, "--format", "npy",
            "--batch-size", "8192", "--runs", "2", "-q"]  # fmt: skip
    iobench([*base, "--results", str(a)], 1800)
    batch_ms = 8192 / records(a)[-1]["samples_per_s"] * 1000
    sleep_ms = 0.2 * batch_ms
    for _ in range(4):
        b.unlink(missing_ok=True)
        iobench([*base, "--step", f"sleep:{sleep_ms:.4f}", "--results", str(b)], 1800)
        _verdict, ratio = _rerun(a, b, work / "rerun-new.jsonl")
        if ratio is None or 1.15 < 1 / ratio < 1.25:
            break
        overhead = (1 / ratio - 1) * batch_ms - sleep_ms
        sleep_ms = max(0.2 * batch_ms - overhead, 0.01)
    return a, b


def _rerun(a: Path, b: Path, results: Path) -> tuple[str, float | None]:
    """`compare A B --rerun`: its verdict (or its error) and the paired ratio B/A it printed."""
    import re

    out, err = iobench(["compare", str(a), str(b), "--rerun", "--results", str(results)], 1800)
    verdict = next(
        (k for k in ("faster", "slower", "no decidable difference", "not comparable") if k in out), err or "none"
    )
    found = re.search(r"B/A (\d+\.\d+)x", out)
    return verdict, float(found.group(1)) if found else None


def rerun_question(work: Path, args: argparse.Namespace, tag: str) -> dict:
    """`compare --rerun` of A against itself (no change) and of A against B (a planted 1.2x change): each verdict."""
    a, b = _rerun_records(work, args)
    kinds = {}
    ratios = {}
    for name, other in (("same", a), ("planted", b)):
        kinds[name], ratios[name] = _rerun(a, other, work / f"rerun-{tag}.jsonl")
    line = ", ".join(f"{n}: {kinds[n]} (B/A {ratios[n]})" for n in kinds)
    return {"line": line, "choice": None, "rates": {}, "shares": [], "others": [], "kinds": kinds, "ratios": ratios}


QUESTIONS = {
    "run": run_question,
    "checkpoint": checkpoint_question,
    "feed": feed_question,
    "rerun": rerun_question,
    "tune": tune_question,
}


def _share(r: dict) -> float | None:
    return share_of(sum(r.get("unit_cpu_s", [])), sum(r.get("unit_cpu_wait_s", [])))


def rerun_summary(rows: list[tuple[str, dict]], busy: str) -> list[str]:
    """How often `compare --rerun` said no change of A against itself, and found the planted change, per condition."""
    out = []
    for condition in ("quiet", "busy"):
        got = [r for c, r in rows if c == condition]
        same = sum(1 for r in got if r["kinds"]["same"] == "no decidable difference")
        found = sum(1 for r in got if r["kinds"]["planted"] == "slower")
        planted = [1 / r["ratios"]["planted"] for r in got if r["ratios"]["planted"]]
        where = "quiet" if condition == "quiet" else f"beside {busy}"
        size = f", planted change measured {statistics.median(planted):.2f}x" if planted else ""
        out.append(
            f"rerun {where}: A against itself no decidable difference in {same} of {len(got)}; the planted change "
            f"found (slower) in {found} of {len(got)}{size}"
        )
    return out


def summary(question: str, rows: list[tuple[str, dict]], busy: str) -> list[str]:
    if question == "rerun":
        return rerun_summary(rows, busy)
    quiet = [r for c, r in rows if c == "quiet"]
    loaded = [r for c, r in rows if c != "quiet"]
    quiet_choices = [r["choice"] for r in quiet if r["choice"] is not None]
    reference = statistics.mode(quiet_choices) if quiet_choices else None
    out = [f"{question}: quiet answered {len(quiet_choices)} of {len(quiet)}, its choice {reference}"]
    answered = [r for r in loaded if r["choice"] is not None]
    agree = sum(1 for r in answered if r["choice"] == reference)
    out.append(
        f"{question}: beside {busy}: answered {len(answered)} of {len(loaded)}; the quiet choice in {agree} of "
        f"{len(answered)}"
    )
    for name in sorted({k for r in quiet for k in r["rates"]}):
        q = [r["rates"][name] for r in quiet if name in r["rates"]]
        b = [r["rates"][name] for r in loaded if name in r["rates"]]
        if q and b:
            out.append(f"  {name}: busy/quiet {statistics.median(b) / statistics.median(q):.2f}")
    shares = [s for r in loaded for s in r["shares"] if s is not None]
    if shares:
        out.append(f"  wait shares beside {busy}: {min(shares):.0%}-{max(shares):.0%}")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=5, help="quiet/busy pairs, alternating")
    p.add_argument("--busy", default="2", help="busy loops beside (a count), or disk")
    p.add_argument("--questions", default="run,checkpoint,feed")
    p.add_argument("--device", default="cpu")
    p.add_argument("--size", default="2e5")
    p.add_argument("--params", default="1e7")
    p.add_argument("--libraries", default="torch,dcp", help="checkpoint's libraries (torch,safetensors: the issue's)")
    p.add_argument("--feed-step-ms", type=float, default=20.0, help="feed's emulated step (40: fed several times here)")
    p.add_argument("--feed-size", type=int, default=4096, help="feed's dataset samples (8192 with a 40 ms step)")
    p.add_argument("--feed-most", type=int, default=4, help="feed's --max-accelerators")
    p.add_argument("--tune-minutes", type=float, default=2.0, help="tune's --budget-minutes (tune: npy)")
    p.add_argument("--dir", type=Path, default=None)
    p.add_argument("--keep", type=Path, default=None, help="a folder to copy every question's records into")
    args = p.parse_args()
    questions = [q for q in args.questions.split(",") if q]
    if not (1 <= args.trials <= 100) or any(q not in QUESTIONS for q in questions):
        raise SystemExit(f"--trials 1..100, --questions from {','.join(QUESTIONS)}")
    if args.busy != "disk" and not (args.busy.isdigit() and int(args.busy) <= 256):
        raise SystemExit("--busy: a count of busy loops (0..256) or disk")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill ends in the `finally` that removes the work
    work = work_dir(args.dir, "iobench-shared-")
    try:
        (work / "data").mkdir(exist_ok=True)
        print(f"host: {_cpu()}, {os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}; beside: {args.busy}", flush=True)
        rows: dict[str, list[tuple[str, dict]]] = {q: [] for q in questions}
        for k in range(args.trials):
            order = ("quiet", "busy") if k % 2 == 0 else ("busy", "quiet")
            for condition in order:
                with beside(args.busy if condition == "busy" else "0", work):
                    for q in questions:
                        began = time.perf_counter()
                        got = QUESTIONS[q](work, args, f"{k}-{condition}")
                        rows[q].append((condition, got))
                        print(
                            f"trial {k + 1} {condition} {q} ({time.perf_counter() - began:.0f} s): "
                            f"{got['line'][-700:]}",
                            flush=True,
                        )
        for q in questions:
            for line in summary(q, rows[q], args.busy if args.busy == "disk" else f"{args.busy} busy loops"):
                print(line)
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for path in sorted(work.glob("*.jsonl")):
                shutil.copyfile(path, args.keep / path.name)
    finally:
        remove_work(work)


if __name__ == "__main__":
    sys.exit(main())
