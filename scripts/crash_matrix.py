"""Every registered loader over every format it reads, in the modes where a loader's threads and its readers race:
cold (the untimed prime after the eviction, a fresh loader per epoch), a resume check (fresh loaders that stop
mid-epoch), cut short (`--max-batches 3`), interrupted (SIGINT mid-run) and several formats in one run (the estimate's
measured batch of each, the next format's loader). Each run is a `python -X faulthandler -m iobench run` of its own,
classified by how it ended:

    ok            rc 0, no traceback
    refused       rc 1 or 2, its last line "iobench: error: ..." and no traceback
    interrupted   SIGINT: rc 130 within 2 s of the signal (and its library's own shutdown), "interrupted" its last line
    SIGSEGV, ...  killed by a signal
    traceback     a Python traceback, or "Exception ignored", anywhere in its output
    slow exit     SIGINT: ended, but later than that
    hang          still running at the timeout (killed)
    left N        processes it started still running 10 s after it ended (Ray's agents: ppid 1, our user)

The pairs come from the registries (`iobench.loaders.LOADERS`, `iobench.formats.FORMATS`, installed ones only), and
so do the variants that start threads or processes (`--prefetch-thread`, `--fetch-threads`, `--num-workers`) from
the settings each loader honours. `--checkout DIR` runs another checkout's iobench (`python -m iobench` from DIR:
before a fix). `--sample N --seed S` draws N cases (tests/loaders/test_crash_matrix.py runs such a subset).

    python scripts/crash_matrix.py --data-dir /tmp/crash --size 2e5 --out crash.jsonl
    python scripts/crash_matrix.py --data-dir /tmp/crash --checkout /tmp/old --out before.jsonl
    python scripts/crash_matrix.py --table before.jsonl after.jsonl   # the Markdown table of both
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

MODES = ("cold", "resume", "short", "sigint", "multi")
MODE_ARGS = {
    "cold": ["--cache", "cold", "--runs", "2", "--warmup", "0", "--epochs", "1"],
    "resume": ["--resume-check", "--runs", "1", "--warmup", "1", "--epochs", "1"],
    "short": ["--max-batches", "3", "--runs", "2", "--warmup", "1", "--epochs", "1"],
    "sigint": ["--runs", "100000", "--warmup", "1", "--epochs", "1"],
    "multi": ["--runs", "1", "--warmup", "1", "--epochs", "1", "--max-batches", "20"],
}
INTERRUPT_GRACE_S = 2.0  # a run interrupted by SIGINT must be gone within this, with its library's shutdown below
# What a library's own shutdown adds, by the extra its loader needs: iobench waits for it so that nothing it started
# outlives the run. Ray ends its processes one after the other: ray-data's SIGINT exit took 1.2-1.8 s on a quiet
# 2-vCPU AMD EPYC host (8 runs), 2.39 s once in CI, against the 2 s that is iobench's own.
SHUTDOWN_S = {"ray": 3.0}
LEFT_WAIT_S = 10.0  # what a run started must be gone within this after it ended (Ray's guard ends its agents)


@dataclass(frozen=True)
class Case:
    loader: str  # the registered loader
    variant: str  # "" or the threads/processes it was asked for, e.g. "--prefetch-thread 2"
    formats: tuple[str, ...]
    mode: str

    @property
    def name(self) -> str:
        extra = f" {self.variant}" if self.variant else ""
        return f"{self.loader}{extra}"


@dataclass(frozen=True)
class Outcome:
    case: dict
    result: str  # ok, refused, interrupted, SIGSEGV, traceback, slow exit, hang ...
    rc: int | None
    seconds: float
    exit_after_signal_s: float | None
    last_line: str
    left: int = 0


def variants(kind: object) -> list[tuple[str, list[str]]]:
    """The loader as run by default, and with each setting it honours that starts threads or processes."""
    honours = kind.honours  # type: ignore[attr-defined]
    threads = not kind.forks  # type: ignore[attr-defined]
    base_workers = max(kind.min_workers, 2 if threads and "num_workers" in honours else 0)  # type: ignore[attr-defined]
    base = ["--num-workers", str(base_workers)] if "num_workers" in honours else []
    found = [(" ".join(base) if base_workers else "", base)]
    if "prefetch_thread" in honours:
        found.append(("--prefetch-thread 2", [*base, "--prefetch-thread", "2"]))
    if "fetch_threads" in honours:
        found.append(("--fetch-threads 4", [*base, "--fetch-threads", "4"]))
    if "num_workers" in honours and not threads and not base_workers:
        found.append(("--num-workers 2", ["--num-workers", "2"]))
    return found


def cases(formats: list[str] | None, loaders: list[str] | None, modes: tuple[str, ...]) -> list[tuple[Case, list]]:
    from iobench.formats import FORMATS
    from iobench.loaders import LOADERS

    prepared = [f for f in FORMATS if FORMATS.loads(f) is None and (formats is None or f in formats)]
    found = []
    for kind in LOADERS.values():
        if not kind.installed or (loaders is not None and kind.name.value not in loaders):
            continue
        reads = [f for f in kind.reads if f in prepared]
        for variant, args in variants(kind):
            for mode in modes:
                groups = [tuple(reads)] if mode == "multi" else [(f,) for f in reads]
                for group in groups:
                    if group:
                        found.append((Case(kind.name.value, variant, group, mode), args))
    return found


def prepare(data_dir: Path, size: str, formats: list[str] | None) -> Path:
    """The dataset of `size` samples with every format asked for (what is missing is added)."""
    from iobench.formats import FORMATS
    from iobench.spec import DatasetSpec
    from iobench.units import parse_size

    names = [f for f in FORMATS if FORMATS.loads(f) is None and (formats is None or f in formats)]
    dataset = data_dir / DatasetSpec(parse_size(size)).name
    manifest = dataset / "manifest.json"
    have = json.loads(manifest.read_text())["formats"] if manifest.is_file() else {}
    missing = [f for f in names if f not in have]
    if missing:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "iobench",
                "prepare",
                "--size",
                size,
                "--formats",
                ",".join(missing),
                "--data-dir",
                str(data_dir),
                "-q",
            ],
            check=True,
        )
    return dataset


def our_orphans() -> set[int]:
    """Processes of this user whose parent is init (what a run left behind), by PID."""
    from iobench.system.processes import parent_of

    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry).st_uid != os.getuid():
                continue
        except OSError:
            continue
        if parent_of(int(entry.name)) == 1:
            found.add(int(entry.name))
    return found


def grace_s(loader: str) -> float:
    """How long after SIGINT a run of `loader` may take to be gone: iobench's part and its library's shutdown."""
    from iobench.loaders import kind_of

    kind = kind_of(loader)
    return INTERRUPT_GRACE_S + SHUTDOWN_S.get((kind.extra if kind is not None else None) or "", 0.0)


def classify(
    rc: int | None, output: str, mode: str, after_signal: float | None, grace: float = INTERRUPT_GRACE_S
) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if rc is None:
        return "hang"
    if "Fatal Python error" in output or rc < 0 or rc in (128 + signal.SIGSEGV, 128 + signal.SIGABRT):
        signum = -rc if rc < 0 else rc - 128
        return signal.Signals(signum).name if 0 < signum < 65 else "fatal"
    if "Traceback (most recent call last)" in output or "Exception ignored" in output:
        return "traceback"
    if mode == "sigint" and rc == 130:
        return "interrupted" if after_signal is not None and after_signal <= grace else "slow exit"
    if rc == 0:
        return "ok"
    if rc in (1, 2) and last.startswith("iobench: error:"):
        return "refused"
    return f"rc {rc}"


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_case(
    case: Case,
    args: list[str],
    dataset: Path,
    checkout: Path | None,
    timeout: float,
    sigint_after: float,
    device: str = "cpu",
) -> Outcome:
    results = dataset.parent / "crash-matrix-results.jsonl"  # one file: the machine's limits are measured once
    command = [
        sys.executable,
        "-X",
        "faulthandler",
        "-m",
        "iobench",
        "run",
        "--format",
        ",".join(case.formats),
        "--loader",
        case.loader,
        "--device",
        device,
        "--data-dir",
        str(dataset.parent),
        "--dataset",
        dataset.name,
        "--results",
        str(results),
        "--batch-size",
        "1024",
        *args,
        *MODE_ARGS[case.mode],
    ]
    before = our_orphans()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    started = time.monotonic()
    # SIGINT as a terminal gives it (this script may run as a background job, whose SIGINT is ignored and inherited)
    proc = subprocess.Popen(
        command,
        cwd=checkout or None,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )
    after_signal = None
    try:
        if case.mode == "sigint":
            try:
                out, _ = proc.communicate(timeout=sigint_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)
                signalled = time.monotonic()
                out, _ = proc.communicate(timeout=timeout)
                after_signal = time.monotonic() - signalled
        else:
            out, _ = proc.communicate(timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        rc = None
    seconds = time.monotonic() - started
    text = out.decode(errors="replace")
    deadline = time.monotonic() + LEFT_WAIT_S  # a guard may still be ending what the run started
    while (left := len(our_orphans() - before)) and time.monotonic() < deadline:
        time.sleep(0.25)
    result = classify(rc, text, case.mode, after_signal, grace_s(case.loader))
    lines = [line for line in text.splitlines() if line.strip()]
    waited = None if after_signal is None else round(after_signal, 2)
    return Outcome(asdict(case), result, rc, round(seconds, 2), waited, lines[-1][:300] if lines else "", left)


def table(paths: list[Path]) -> str:
    """Per loader variant and mode, each run's results counted (the formats named where it was not clean); one
    column per file given (before, after)."""
    columns = []
    for path in paths:
        cells: dict[tuple[str, str], Counter] = defaultdict(Counter)
        bad: dict[tuple[str, str], list[str]] = defaultdict(list)
        for line in path.read_text().splitlines():
            o = json.loads(line)
            case = Case(**{**o["case"], "formats": tuple(o["case"]["formats"])})
            key = (case.name, case.mode)
            result = o["result"] + (f" + left {o['left']}" if o.get("left") else "")
            cells[key][result] += 1
            if result not in ("ok", "refused", "interrupted"):
                bad[key].append("/".join(case.formats) if case.mode != "multi" else "all")
        columns.append((path, cells, bad))
    rows = sorted({k for _, cells, _ in columns for k in cells})
    head = "| loader | mode | " + " | ".join(p.stem for p, _, _ in columns) + " |"
    out = [head, "| --- | --- |" + " --- |" * len(columns)]
    for key in rows:
        cells_text = []
        for _, cells, bad in columns:
            counts = cells.get(key, Counter())
            text = ", ".join(f"{n} {r}" for r, n in counts.most_common())
            if bad.get(key):
                text += f" ({', '.join(sorted(set(bad[key])))})"
            cells_text.append(text or "-")
        out.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells_text) + " |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "iobench-crash-matrix")
    parser.add_argument("--size", default="2e5")
    parser.add_argument("--formats", help="comma-separated; default: every installed one")
    parser.add_argument("--loaders", help="comma-separated; default: every installed one")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--checkout", type=Path, help="run this checkout's iobench (python -m iobench from it)")
    parser.add_argument("--sample", type=int, help="run this many cases, drawn with --seed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--sigint-after", type=float, default=8.0)
    parser.add_argument("--out", type=Path, default=Path("crash-matrix.jsonl"))
    parser.add_argument("--device", default="cpu", help="the runs' --device (cuda on a GPU machine)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="cases at a time (a case's 'left' then counts the "
        "orphans of the cases beside it too: a lead, not a verdict; sigint's 2 s holds on an idle "
        "machine only)",
    )
    parser.add_argument("--table", nargs="+", type=Path, help="print the Markdown table of these result files")
    a = parser.parse_args()
    if a.table:
        print(table(a.table))
        return
    formats = a.formats.split(",") if a.formats else None
    loaders = a.loaders.split(",") if a.loaders else None
    dataset = prepare(a.data_dir.resolve(), a.size, formats)
    todo = cases(formats, loaders, tuple(a.modes.split(",")))
    if a.sample is not None:
        todo = random.Random(a.seed).sample(todo, min(a.sample, len(todo)))
    print(f"{len(todo)} cases over {dataset}", file=sys.stderr)

    def one(item: tuple[Case, list]) -> Outcome:
        return run_case(*item, dataset, a.checkout, a.timeout, a.sigint_after, a.device)

    with a.out.open("a") as out, ThreadPoolExecutor(max(1, a.jobs)) as pool:
        futures = {pool.submit(one, item): item[0] for item in todo}
        for k, future in enumerate(as_completed(futures)):  # each written as it ends: a cut-short matrix keeps them
            case, outcome = futures[future], future.result()
            out.write(json.dumps(asdict(outcome)) + "\n")
            out.flush()
            print(
                f"[{k + 1}/{len(todo)}] {case.name} {case.mode} {','.join(case.formats)}: {outcome.result} "
                f"({outcome.seconds:.1f} s) {outcome.last_line[:120]}",
                file=sys.stderr,
            )
    print(table([a.out]))


if __name__ == "__main__":
    main()
