"""`iobench checkpoint`: each library saves the state and restores it, warm and cold, every trial in a fresh process
(its peak memory its own), the libraries in turn within each round (a shared machine's drift falls on all); and the
kill test: a save of step N+1 over step N killed at a random moment, then a restore, classified.

The checkpoints live in folders iobench makes under `--dir` and removes on every exit path; a save writes into a
fresh folder. Cold: the checkpoint's files evicted from the page cache (fadvise, as `--cache cold` evicts data) and
their residency checked before the clock."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import shutil
import signal
import stat
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
from iobench.results.checkpoint_record import KILL_OUTCOMES, CheckpointKills, CheckpointTrial
from iobench.results.store import append_line
from iobench.storage.local.page_cache import evict, resident_fraction
from iobench.system.fsutil import free_bytes
from iobench.system.private import owner_tag, stale_dirs
from iobench.system.processes import python_module
from iobench.system.ranks import child_env, run_ranks

TRIAL_MODULE = "iobench.checkpoint.trial"


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


def check_fits(spec: StateSpec, libraries: list[Library], nproc: int = 1, free: int | None = None,
               what: str = "--params") -> None:  # fmt: skip
    """Refuse in one line a state that a library's save or restore would not fit in memory: a save holds the state,
    a non-mapped load about twice it (torch.load, safetensors' load_file), each rank of a library that takes ranks
    its own copy. The memory is what this process can take: MemAvailable, or less under a memory cgroup."""
    from iobench.system.memory import MemoryRoom, memory_room

    room = memory_room() if free is None else MemoryRoom(free, free, "")
    if not libraries:
        return

    def need(lib: Library) -> int:
        return int(spec.state_bytes * lib.memory_factor * 1.1) * (nproc if lib.ranks else 1)

    worst = max(libraries, key=need)
    if need(worst) > room.available:
        ranks = f" in each of {nproc} ranks" if worst.ranks and nproc > 1 else ""
        smaller = f"give a smaller {what}" if not spec.source else "give a smaller model"
        raise IobenchError(f"checkpoint: a {spec.state_bytes / 2**30:.2f} GiB state{ranks} needs about "
                           f"{need(worst) / 2**30:.1f} GiB of memory for {worst.name} and "
                           f"{room.available / 2**30:.1f} GiB is {room.says()}; {smaller} or leave {worst.name} out "
                           "with --libraries")  # fmt: skip


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


def trial(job: dict, timeout_s: float, folder: Path | None = None) -> dict:
    """One save or restore in a fresh process; its JSON line, or the failure in one line (a full disk said as such:
    the libraries speak of SIGBUS or "unexpected pos")."""
    free_before = free_bytes(folder) if folder is not None else None
    try:
        done = _in_a_process(job, timeout_s)
    except subprocess.TimeoutExpired:
        raise IobenchError(f"checkpoint: {job['library']} {job['op']} ran past {timeout_s:.0f} s") from None
    if done.returncode != 0:
        lines = [x for x in done.stderr.splitlines() if x.strip()]
        why = lines[-1][:300] if lines else f"exit status {done.returncode}"
        if folder is not None and job["op"] == "save" and (left := free_bytes(folder)) < FULL_DISK_BYTES:
            why = (f"the disk is full ({free_before / 1e6:,.0f} MB free under --dir before the save, {left / 1e6:,.0f}"
                   f" MB after; the library said: {why})")  # fmt: skip
        raise IobenchError(f"checkpoint: {job['library']} {job['op']} failed: {why}")
    return json.loads(done.stdout.strip().splitlines()[-1])


FULL_DISK_BYTES = 64 * 2**20  # less free than this after a failed save: the disk filled


def bytes_on_disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


WORK_KIND = ".iobench-checkpoint"  # `<kind>-<pid>-<start>-XXXX`: whose work folder it is, after a PID is reused


@contextmanager
def work_folder(directory: Path) -> Iterator[Path]:
    """A folder of iobench's own under `directory` (0700, made here), removed on every exit path, with the folders
    above it that were made for it; what a killed checkpoint left there (its process gone) is removed first. A
    `directory` that is a link, not a folder or not writable is refused in one line."""
    made = _made_parents(directory)
    try:
        for stale in stale_dirs(WORK_KIND, directory):
            shutil.rmtree(stale, ignore_errors=True)
        try:
            folder = Path(tempfile.mkdtemp(prefix=f"{WORK_KIND}-{owner_tag()}-", dir=directory))
        except OSError as exc:
            raise IobenchError(f"--dir {directory}: cannot write there: {exc.strerror or exc}") from None
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        for parent in made:  # deepest first; a folder something else now holds stays
            with contextlib.suppress(OSError):
                parent.rmdir()


def check_directory(directory: Path) -> None:
    """--dir checked before anything is said or made: not a link, a folder (or missing below one), writable."""
    for path in (directory, *directory.parents):
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):  # missing, or below a file (said when the file is reached)
            continue
        except OSError as exc:
            raise IobenchError(f"--dir {directory}: {exc.strerror or exc}") from None
        if path == directory and stat.S_ISLNK(st.st_mode):
            raise IobenchError(f"--dir {directory} is a link; give the folder it points to")
        if not stat.S_ISDIR(os.stat(path).st_mode):
            raise IobenchError(f"--dir {directory}: {path} is not a folder")
        if not os.access(path, os.W_OK):
            read_only = os.statvfs(path).f_flag & os.ST_RDONLY
            why = "Read-only file system" if read_only else "permission denied"
            raise IobenchError(f"--dir {directory}: cannot write in {path}: {why}")
        return


def _made_parents(directory: Path) -> list[Path]:
    """`directory` checked and made with its missing parents; those made, deepest first."""
    check_directory(directory)
    missing = []
    for path in (directory, *directory.parents):
        if os.path.lexists(path):
            break
        missing.append(path)
    made: list[Path] = []
    try:
        for path in reversed(missing):
            path.mkdir(mode=0o777)
            made.append(path)
    except OSError as exc:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                path.rmdir()
        raise IobenchError(f"--dir {directory}: cannot make {path}: {exc.strerror or exc}") from None
    return list(reversed(made))


def timeout_of(spec: StateSpec) -> float:
    return 120 + spec.state_bytes / 20e6  # a disk of 20 MB/s would still finish


def run_checkpoints(job: CheckpointJob, said: Callable[[str], None]) -> list[CheckpointTrial]:
    """Every library's save and restores, `trials` rounds; each record appended to `job.results` as it is made."""
    libraries = [LIBRARIES[n] for n in job.libraries]
    check_fits(job.spec, libraries, job.nproc)
    records: list[CheckpointTrial] = []
    with work_folder(job.directory) as root:
        for round_ in range(job.trials):
            for lib in libraries:
                folder = root / f"{lib.name}-{round_}"
                folder.mkdir(mode=0o700)
                args = {"library": lib.name, "params": job.spec.params, "layout": job.spec.layout,
                        "seed": job.spec.seed, "source": job.spec.source, "folder": str(folder),
                        "nproc": job.nproc if lib.ranks else 1}  # fmt: skip
                saved = trial({**args, "op": "save"}, timeout_of(job.spec), folder)
                size = bytes_on_disk(folder)
                records.append(_record(job, lib, "save", None, round_, saved, size))
                said(f"round {round_ + 1}: {lib.name} saved {size / 1e9:.2f} GB in {saved['durable_seconds']:.2f} s "
                     "(durable)")  # fmt: skip
                for cache in job.caches:
                    before = _made_cold(folder) if cache == "cold" else resident_fraction(files_of(folder))
                    restored = trial({**args, "op": "restore", "check": round_ == 0, "device": job.device},
                                     timeout_of(job.spec), folder)  # fmt: skip
                    restored["resident_before"] = before  # in the stored record too
                    records.append(_record(job, lib, "restore", cache, round_, restored, size))
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


MEASURED_KEYS = ("seconds", "done_seconds", "durable_seconds", "peak_rss_bytes", "anon_bytes", "file_bytes",
                 "read_bytes", "resident_before", "exact", "differences", "ranks")  # fmt: skip


def _record(job: CheckpointJob, lib: Library, op: str, cache: str | None, round_: int, measured: dict,
            size: int) -> CheckpointTrial:  # fmt: skip
    seconds, durable = measured["seconds"], measured.get("durable_seconds")
    record = CheckpointTrial(
        library=lib.name, ceiling=lib.ceiling, op=op, cache=cache, trial=round_, params=job.spec.params,
        layout=job.spec.layout, device=job.device, nproc=job.nproc, state_bytes=job.spec.state_bytes,
        seed=job.spec.seed, source=Path(job.spec.source).name if job.spec.source else None, bytes_on_disk=size,
        gb_per_s=size / seconds / 1e9 if seconds > 0 else None,
        durable_gb_per_s=size / durable / 1e9 if durable else None,
        timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), load_before=os.getloadavg()[0],
        **{k: measured[k] for k in MEASURED_KEYS if k in measured},
    )  # fmt: skip
    append_line(job.results, json.dumps(record.to_json()))
    return record


def summary(records: list[CheckpointTrial]) -> list[dict]:
    """Per library: median save seconds (returned, durable), restore seconds warm and cold, GB/s, peak memory, bytes
    on disk, and whether every checked restore was exact."""
    rows = []
    for name in dict.fromkeys(r.who for r in records):
        mine = [r for r in records if r.who == name]

        def median(op: str, key: str, cache: str | None = None, of: list[CheckpointTrial] = mine) -> float | None:
            values = [getattr(r, key) for r in of if r.op == op and r.cache == cache and getattr(r, key) is not None]
            return statistics.median(values) if values else None

        checked = [r.exact for r in mine if r.exact is not None]
        rows.append({
            "library": name, "ceiling": mine[0].ceiling, "bytes_on_disk": mine[0].bytes_on_disk,
            "save_s": median("save", "seconds"), "done_s": median("save", "done_seconds"),
            "durable_s": median("save", "durable_seconds"),
            "warm_s": median("restore", "seconds", "warm"), "cold_s": median("restore", "seconds", "cold"),
            "cold_rates": [r.gb_per_s for r in mine if r.op == "restore" and r.cache == "cold" and r.gb_per_s],
            "restore_peak": max((r.peak_rss_bytes for r in mine if r.op == "restore" and r.peak_rss_bytes),
                                default=None),
            "exact": all(checked) if checked else None,
        })  # fmt: skip
    return rows


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


def record_kills(results: Path, spec: StateSpec, library: str, counts: dict[str, int]) -> CheckpointKills:
    """The kill test's counts for one library, appended to the results as a record of their own."""
    record = CheckpointKills(params=spec.params, layout=spec.layout, state_bytes=spec.state_bytes, library=library,
                             kills=sum(counts.values()), counts=counts,
                             timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))  # fmt: skip
    append_line(results, json.dumps(record.to_json()))
    return record


def refused_libraries(names: list[str]) -> list[str]:
    """The libraries asked for that are not installed, each as a line."""
    return [f"skipped {n}: {LIBRARIES[n].needs} is not installed" for n in names if not LIBRARIES[n].installed]


def parse_libraries(text: str) -> list[str]:
    names = list(LIBRARIES) if text.strip() == "all" else [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise IobenchError(f"--libraries: name at least one of {', '.join(LIBRARIES)}, or all")
    unknown = [n for n in names if n not in LIBRARIES]
    if unknown:
        raise IobenchError(f"--libraries: unknown {unknown[0]!r}; one of {', '.join(LIBRARIES)} or all")
    return names
