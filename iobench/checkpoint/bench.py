"""`iobench checkpoint`: each library saves the state and restores it, warm and cold, every trial in a fresh process
(its peak memory its own), the libraries in turn within each round (a shared machine's drift falls on all); and the
kill test: a save of step N+1 over step N killed at a random moment, then a restore, classified.

The checkpoints live in folders iobench makes under `--dir` and removes on every exit path; a save writes into a
fresh folder. Cold: the checkpoint's files evicted from the page cache (fadvise, as `--cache cold` evicts data) and
their residency checked before the clock."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from iobench.checkpoint.libraries import LIBRARIES, Library
from iobench.checkpoint.state import StateSpec
from iobench.errors import IobenchError
from iobench.results.store import append_line
from iobench.storage.local.page_cache import evict, resident_fraction
from iobench.system.processes import python_module
from iobench.system.ranks import child_env, run_ranks

TRIAL_MODULE = "iobench.checkpoint.trial"
KILL_OUTCOMES = ("N intact", "N+1 intact", "clean error", "silent corruption", "restore crashed")


@dataclass(frozen=True)
class CheckpointJob:
    spec: StateSpec
    libraries: tuple[str, ...]
    directory: Path
    caches: tuple[str, ...] = ("warm", "cold")
    trials: int = 3
    results: Path = Path("results/checkpoints.jsonl")
    device: str = "cpu"  # where restores put the state: host memory, or a CUDA device's
    nproc: int = 1  # processes saving and restoring together (torchrun, gloo), for the libraries that take ranks


def check_fits(spec: StateSpec, libraries: list[Library], free: int | None = None) -> None:
    """Refuse in one line a state that a library's save or restore would not fit in memory: a save holds the state,
    a non-mapped load about twice it (torch.load, safetensors' load_file)."""
    if free is None:
        import torch

        from iobench.loaders.resident import available_bytes

        free = available_bytes(torch.device("cpu"))
    worst = max(libraries, key=lambda lib: lib.memory_factor)
    need = int(spec.state_bytes * worst.memory_factor * 1.1)
    if need > free:
        raise IobenchError(f"checkpoint: a {spec.state_bytes / 2**30:.2f} GiB state needs about {need / 2**30:.1f} GiB "
                           f"of memory for {worst.name} and {free / 2**30:.1f} GiB is available; give a smaller "
                           "--params or leave it out with --libraries")  # fmt: skip


def _in_a_process(job: dict, timeout_s: float) -> subprocess.CompletedProcess:
    """`iobench.checkpoint.trial` run on the job in a fresh process that imports the running iobench and dies with
    this one; with `nproc` above 1, in that many ranks (`iobench.system.ranks`: the store on loopback). Rank 0's
    output, or the first failed rank's."""
    argv = python_module(TRIAL_MODULE, json.dumps(job))
    if job.get("nproc", 1) > 1:
        try:
            exits = run_ranks(argv, job["nproc"], capture=True, timeout_s=timeout_s)
        except TimeoutError:
            raise subprocess.TimeoutExpired(argv, timeout_s) from None
        shown = next((e for e in exits if e.code != 0), exits[0])
        return subprocess.CompletedProcess(argv, shown.code, shown.stdout, shown.stderr)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except BaseException:  # a timeout or an interrupt: the trial is not left running
            proc.kill()
            proc.wait()
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def trial(job: dict, timeout_s: float) -> dict:
    """One save or restore in a fresh process; its JSON line, or the failure in one line."""
    try:
        done = _in_a_process(job, timeout_s)
    except subprocess.TimeoutExpired:
        raise IobenchError(f"checkpoint: {job['library']} {job['op']} ran past {timeout_s:.0f} s") from None
    if done.returncode != 0:
        lines = [x for x in done.stderr.splitlines() if x.strip()]
        raise IobenchError(
            f"checkpoint: {job['library']} {job['op']} failed: {lines[-1] if lines else done.returncode}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def bytes_on_disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


@contextmanager
def work_folder(directory: Path) -> Iterator[Path]:
    """A folder of iobench's own under `directory` (0700, made here), removed on every exit path."""
    directory.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".iobench-checkpoint-", dir=directory))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def timeout_of(spec: StateSpec) -> float:
    return 120 + spec.state_bytes / 20e6  # a disk of 20 MB/s would still finish


def run_checkpoints(job: CheckpointJob, said: Callable[[str], None]) -> list[dict]:
    """Every library's save and restores, `trials` rounds; each record appended to `job.results` as it is made."""
    libraries = [LIBRARIES[n] for n in job.libraries]
    check_fits(job.spec, libraries)
    records: list[dict] = []
    base = {"kind": "checkpoint", "params": job.spec.params, "layout": job.spec.layout, "device": job.device,
            "nproc": job.nproc,
            "state_bytes": job.spec.state_bytes, "seed": job.spec.seed,
            "source": Path(job.spec.source).name if job.spec.source else None}  # fmt: skip
    with work_folder(job.directory) as root:
        for round_ in range(job.trials):
            for lib in libraries:
                folder = root / f"{lib.name}-{round_}"
                folder.mkdir(mode=0o700)
                args = {"library": lib.name, "params": job.spec.params, "layout": job.spec.layout,
                        "seed": job.spec.seed, "source": job.spec.source, "folder": str(folder),
                        "nproc": job.nproc if lib.ranks else 1}  # fmt: skip
                saved = trial({**args, "op": "save"}, timeout_of(job.spec))
                size = bytes_on_disk(folder)
                records.append(_record(job, base, lib, "save", None, round_, saved, size))
                said(f"round {round_ + 1}: {lib.name} saved {size / 1e9:.2f} GB in {saved['durable_seconds']:.2f} s "
                     "(durable)")  # fmt: skip
                for cache in job.caches:
                    before = _made_cold(folder) if cache == "cold" else resident_fraction(files_of(folder))
                    restored = trial({**args, "op": "restore", "check": round_ == 0, "device": job.device},
                                     timeout_of(job.spec))  # fmt: skip
                    restored["resident_before"] = before  # in the stored record too
                    records.append(_record(job, base, lib, "restore", cache, round_, restored, size))
                    if restored.get("exact") is False:
                        said(f"{lib.name}: the restored state differs: {'; '.join(restored['differences'])}")
                shutil.rmtree(folder)
    return records


def _made_cold(folder: Path) -> float:
    files = files_of(folder)
    evict(files, "fadvise")
    left = resident_fraction(files)
    if left > 0.05:
        raise IobenchError(f"checkpoint: {left:.0%} of the checkpoint stayed cached after eviction; cold is not cold")
    return left


def _record(job: CheckpointJob, base: dict, lib: Library, op: str, cache: str | None, round_: int, measured: dict,
            size: int) -> dict:  # fmt: skip
    seconds = measured["seconds"]
    record = {**base, "library": lib.name, "ceiling": lib.ceiling, "op": op, "cache": cache, "trial": round_,
              "bytes_on_disk": size, "gb_per_s": size / seconds / 1e9 if seconds > 0 else None,
              "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "load_before": os.getloadavg()[0], **measured}  # fmt: skip
    if "durable_seconds" in measured:
        record["durable_gb_per_s"] = size / measured["durable_seconds"] / 1e9
    append_line(job.results, json.dumps(record))
    return record


def summary(records: list[dict]) -> list[dict]:
    """Per library: median save seconds (returned, durable), restore seconds warm and cold, GB/s, peak memory, bytes
    on disk, and whether every checked restore was exact."""
    rows = []
    for name in dict.fromkeys(who(r) for r in records):
        mine = [r for r in records if who(r) == name]

        def median(op: str, key: str, cache: str | None = None, of: list[dict] = mine) -> float | None:
            values = [r[key] for r in of if r["op"] == op and r.get("cache") == cache and r.get(key) is not None]
            return statistics.median(values) if values else None

        checked = [r["exact"] for r in mine if "exact" in r]
        rows.append({
            "library": name, "ceiling": mine[0]["ceiling"], "bytes_on_disk": mine[0]["bytes_on_disk"],
            "save_s": median("save", "seconds"), "done_s": median("save", "done_seconds"),
            "durable_s": median("save", "durable_seconds"),
            "warm_s": median("restore", "seconds", "warm"), "cold_s": median("restore", "seconds", "cold"),
            "cold_rates": [r["gb_per_s"] for r in mine if r["op"] == "restore" and r.get("cache") == "cold"],
            "restore_peak": max((r["peak_rss_bytes"] for r in mine if r["op"] == "restore"), default=None),
            "exact": all(checked) if checked else None,
        })  # fmt: skip
    return rows


def who(r: dict) -> str:
    """A record's library, with its ranks where several saved and restored together (--nproc)."""
    return r["library"] + (f" x{r['ranks']} ranks" if r.get("ranks", 1) > 1 else "")


def answer(rows: list[dict], kills: dict[str, dict[str, int]] | None = None) -> str | None:
    """Which library to use: the fastest cold restore plus durable save among those that restored exactly and, where
    the kill test ran, never corrupted silently; the ceiling is not a choice."""
    candidates = [r for r in rows if not r["ceiling"] and r["exact"] and r["durable_s"] and r["cold_s"]]
    if kills:
        candidates = [r for r in candidates if kills.get(r["library"], {}).get("silent corruption", 0) == 0]
    if not candidates:
        return None
    best = min(candidates, key=lambda r: r["durable_s"] + r["cold_s"])
    rates = best["cold_rates"]
    spread = f" (cold restores {min(rates):.2f}-{max(rates):.2f} GB/s)" if len(rates) > 1 else ""
    ceiling = next((r for r in rows if r["ceiling"] and r["cold_s"]), None)
    versus = f", {ceiling['cold_s'] / best['cold_s']:.2f}x the raw read" if ceiling else ""
    return (f"answer: save with {best['library']}: durable in {best['durable_s']:.2f} s, restored cold in "
            f"{best['cold_s']:.2f} s{spread}{versus}")  # fmt: skip


def kill_test(spec: StateSpec, library: str, kills: int, directory: Path, seed: int = 0) -> dict[str, int]:
    """Checkpoint N written and durable; then, `kills` times, a child overwriting it in place with N+1 (the same
    folder, as a job saving every few steps does) is SIGKILLed at a random moment within the save's duration, and a
    fresh process restores: N intact, N+1 intact, a clean error, or silent corruption (neither)."""
    rng = random.Random(seed)
    counts = dict.fromkeys(KILL_OUTCOMES, 0)
    with work_folder(directory) as root:
        folder = root / library
        folder.mkdir(mode=0o700)
        args = {
            "library": library,
            "params": spec.params,
            "layout": spec.layout,
            "source": spec.source,
            "folder": str(folder),
        }
        took = trial({**args, "op": "save", "seed": 1}, timeout_of(spec))["durable_seconds"]
        for _ in range(kills):
            shutil.rmtree(folder)
            folder.mkdir(mode=0o700)
            trial({**args, "op": "save", "seed": 1}, timeout_of(spec))  # N, durable
            job = {**args, "op": "save", "seed": 2, "announce": True}
            child = subprocess.Popen(python_module(TRIAL_MODULE, json.dumps(job)), stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=child_env())  # fmt: skip
            try:
                child.stdout.readline()  # "saving": its state made, its clock about to start
                time.sleep(rng.uniform(0, 1.1 * took))  # anywhere in the save, or just after it
            finally:
                child.send_signal(signal.SIGKILL)
                child.wait()
                child.stdout.close()
            counts[_classified(args, spec)] += 1
    return counts


def _classified(args: dict, spec: StateSpec) -> str:
    """The restore after a kill, in a fresh process (a torn file may crash a library's reader)."""
    done = _in_a_process({**args, "op": "classify", "seed": 1, "candidates": {"N": 1, "N+1": 2}}, timeout_of(spec))
    if done.returncode != 0:
        return "restore crashed"
    return json.loads(done.stdout.strip().splitlines()[-1])["outcome"]


def record_kills(results: Path, spec: StateSpec, library: str, counts: dict[str, int]) -> dict:
    """The kill test's counts for one library, appended to the results as a record of their own."""
    record = {"kind": "checkpoint-kill", "params": spec.params, "layout": spec.layout, "state_bytes": spec.state_bytes,
              "library": library, "kills": sum(counts.values()), "counts": counts,
              "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}  # fmt: skip
    append_line(results, json.dumps(record))
    return record


def refused_libraries(names: list[str]) -> list[str]:
    """The libraries asked for that are not installed, each as a line."""
    return [f"skipped {n}: {LIBRARIES[n].needs} is not installed" for n in names if not LIBRARIES[n].installed]


def parse_libraries(text: str) -> list[str]:
    names = list(LIBRARIES) if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in LIBRARIES]
    if unknown:
        raise IobenchError(f"--libraries: unknown {unknown[0]!r}; one of {', '.join(LIBRARIES)} or all")
    return names
