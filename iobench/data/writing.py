"""Write one dataset into several formats at once.

The dataset is generated and content-hashed once in the main process; every chunk goes to one
queue per format, and each format's thread writes, closes, fsyncs and checksums its partial
directory. A format whose writer is mostly Python work per sample (LMDB: one record per sample)
would hold the GIL and slow every other thread, so it runs in its own forked process that
regenerates the same chunks itself (the generator is deterministic) and reports progress and its
result as JSON over a pipe. Nothing is pickled.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import multiprocessing
import os
import queue
import shutil
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobench.data.dataset import ContentHasher, generate
from iobench.data.manifest import FileEntry, FormatEntry
from iobench.formats import FORMATS
from iobench.progress import Reporter
from iobench.spec import Chunk, DatasetSpec
from iobench.storage.local import LocalStorage
from iobench.storage.local.page_cache import Eviction
from iobench.system.fsutil import free_bytes, fsync_tree, make_partial_dir, plain_alias, sha256_file
from iobench.system.signals import signals_held

QUEUE_CHUNKS = 4  # how far one format may lag behind the generator: bounds memory


def write_one(
    name: str, spec: DatasetSpec, options: Any, partial: Path, chunks: Iterable[Chunk], reporter: Reporter
) -> FormatEntry:
    """Write, close, fsync and checksum one format in its partial directory. The writer is handed a plain alias of
    the directory (`plain_alias`): a data folder named `pipe:...` or `p#q` reaches no library as it is."""
    fmt = FORMATS[name]
    key = f"{name}:write"
    busy = 0.0
    with plain_alias(partial) as alias:
        t = time.perf_counter()
        writer = fmt.writer(alias, spec, options)
        try:
            busy += time.perf_counter() - t
            for chunk in chunks:
                t = time.perf_counter()
                writer.write(chunk)
                busy += time.perf_counter() - t
                reporter.advance(key, chunk.nbytes)
        except BaseException:
            writer.abort()
            raise
        t = time.perf_counter()
        writer.close()
        busy += time.perf_counter() - t
    t = time.perf_counter()
    fsync_tree(partial)
    busy += time.perf_counter() - t
    t = time.perf_counter()
    known = writer.digests()
    paths = sorted(p for p in partial.rglob("*") if p.is_file() and p.name not in fmt.ignored_files)
    rel = {p: p.relative_to(partial).as_posix() for p in paths}
    unknown = [p for p in paths if rel[p] not in known]
    size = sum(p.stat().st_size for p in unknown)
    # the files not hashed on the way: a bar only for an amount worth one (a memmap's metadata, 334 bytes, read as
    # "memmap checksum 334/334 bytes" beside a 104 MB format)
    shown = size >= CHECKSUM_BAR_BYTES
    if shown:
        reporter.start(f"{name}:checksum", f"{name} checksum of {len(unknown)} file(s)", size)
    tick = (lambda n: reporter.advance(f"{name}:checksum", n)) if shown else (lambda n: None)
    digests = {rel[p]: sha256_file(p, tick) for p in unknown}
    digests.update(known)
    # Written and hashed: leave the page cache to the formats still being written and hashed, so
    # their re-reads come from memory rather than disk.
    LocalStorage(paths, partial, eviction=Eviction.FADVISE).make_cold()
    entry = FormatEntry(
        name=name,
        directory=name,
        options=fmt.options_to_json(options),
        files=[FileEntry(rel[p], p.stat().st_size, digests[rel[p]]) for p in paths],
        write_seconds=busy,
        checksum_seconds=time.perf_counter() - t,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )
    # the bar counted the data's bytes; what is stored can be fewer (PNG) or more (padding): the line says which
    reporter.finish(key, f"{name} {entry.bytes / 1e6:,.1f} MB stored, {entry.write_mb_per_s:,.0f} MB/s")
    return entry


CHECKSUM_BAR_BYTES = 10**6  # files hashed after writing get a bar from this much on


@dataclass
class FormatJob:
    """One format being written: in a thread fed by the main generator, or in its own process."""

    name: str
    options: Any
    partial: Path
    in_process: bool
    chunks: queue.Queue = field(default_factory=lambda: queue.Queue(QUEUE_CHUNKS))
    error: BaseException | None = None
    entry: FormatEntry | None = None
    thread: threading.Thread | None = None
    process: Any = None
    cancelled: threading.Event = field(default_factory=threading.Event)

    def start(self, spec: DatasetSpec, reporter: Reporter) -> None:
        if self.in_process:
            ctx = multiprocessing.get_context("fork")
            receiver, sender = ctx.Pipe(duplex=False)
            self.process = ctx.Process(
                target=_process_main,
                args=(self.name, spec, self.options, self.partial, sender, os.getpid()),
                name=f"write-{self.name}",
                daemon=True,
            )
            with signals_held():  # an interrupt inside fork() would leave a lock held forever
                self.process.start()
            sender.close()
            target, args = self._relay, (receiver, reporter)
        else:
            target, args = self._run_thread, (spec, reporter)
        self.thread = threading.Thread(target=target, args=args, name=f"write-{self.name}", daemon=True)
        self.thread.start()

    def feed(self, chunk: Chunk | None) -> None:
        if self.in_process:
            return
        while True:
            if self.cancelled.is_set():
                raise self.error or RuntimeError(f"{self.name} writer stopped")
            try:
                self.chunks.put(chunk, timeout=0.1)
                return
            except queue.Full:
                continue

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()
        if self.process is not None:
            self.process.join()

    def cancel(self) -> None:
        self.cancelled.set()
        if self.process is not None:
            with contextlib.suppress(AttributeError, ValueError, OSError):  # not started, or already gone
                self.process.kill()
        try:  # unblock a thread waiting for chunks
            while True:
                self.chunks.get_nowait()
        except queue.Empty:
            pass
        try:
            self.chunks.put_nowait(None)
        except queue.Full:
            pass
        if self.thread is not None and self.thread.ident is not None:  # an interrupt may precede start()
            self.thread.join(timeout=10)
        if self.process is not None:
            with contextlib.suppress(AssertionError, ValueError):  # join() refuses a process never started
                self.process.join(timeout=10)

    def _queued(self) -> Iterator[Chunk]:
        while (chunk := self.chunks.get()) is not None:
            if self.cancelled.is_set():
                raise RuntimeError("cancelled")
            yield chunk

    def _run_thread(self, spec: DatasetSpec, reporter: Reporter) -> None:
        try:
            self.entry = write_one(self.name, spec, self.options, self.partial, self._queued(), reporter)
        except BaseException as exc:  # reported by the main thread
            self.error = exc
            self.cancelled.set()

    def _relay(self, receiver: Any, reporter: Reporter) -> None:
        """Turn the child's JSON messages into progress, and its last message into the result."""
        try:
            while True:
                try:
                    message = json.loads(receiver.recv_bytes())
                except EOFError:
                    raise RuntimeError(f"the {self.name} writer process died") from None
                kind = message["kind"]
                if kind == "advance":
                    reporter.advance(message["key"], message["n"])
                elif kind == "start":
                    reporter.start(message["key"], message["description"], message["total"])
                elif kind == "finish":
                    reporter.finish(message["key"], message["description"])
                elif kind == "done":
                    self.entry = FormatEntry.from_json(self.name, message["entry"])
                    return
                else:
                    raise RuntimeError(message["error"])
        except BaseException as exc:
            self.error = exc
            self.cancelled.set()
        finally:
            receiver.close()


class _PipeReporter:
    """Progress from a child process, as JSON messages (coalesced to a few per second)."""

    def __init__(self, sender: Any) -> None:
        self.sender = sender
        self.pending: dict[str, int] = {}
        self.last = 0.0

    def send(self, **message: Any) -> None:
        self.sender.send_bytes(json.dumps(message).encode())

    def start(self, key: str, description: str, total: int) -> None:
        self.send(kind="start", key=key, description=description, total=total)

    def advance(self, key: str, n: int) -> None:
        self.pending[key] = self.pending.get(key, 0) + n
        if time.monotonic() - self.last > 0.1:
            self.flush()

    def flush(self) -> None:
        for key, n in self.pending.items():
            self.send(kind="advance", key=key, n=n)
        self.pending.clear()
        self.last = time.monotonic()

    def finish(self, key: str, description: str) -> None:
        self.flush()
        self.send(kind="finish", key=key, description=description)


def _process_main(name: str, spec: DatasetSpec, options: Any, partial: Path, sender: Any, parent: int) -> None:
    # Ctrl-C reaches the whole process group: the parent decides, and kills this child if it stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    reporter = _PipeReporter(sender)
    code = 0
    try:
        entry = write_one(name, spec, options, partial, regenerated(spec, partial, parent), reporter)
        reporter.send(kind="done", entry=entry.to_json())
    except BaseException as exc:
        code = 1
        try:
            reporter.send(kind="error", error=f"{type(exc).__name__}: {exc}")
        except OSError:
            pass
    finally:
        sender.close()
        os._exit(code)


def regenerated(
    spec: DatasetSpec, folder: Path, parent: int, start: int = 0, stop: int | None = None
) -> Iterator[Chunk]:
    """The stream regenerated (or re-read from the source) in a writer process of its own: it stops when the
    process that started it is gone (rather than writing into the void) or the disk is nearly full."""
    for chunk in generate(spec, start, stop):
        if os.getppid() != parent:
            raise RuntimeError("the prepare that started this writer is gone")
        check_room(folder)
        yield chunk


class DiskNearlyFull(OSError):
    """Raised before a write would fill the file system: some libraries (HDF5) crash at ENOSPC."""


MIN_FREE_BYTES = 64 * 2**20  # stop writing with this much still free


def check_room(folder: Path) -> None:
    """The free-space check of the plan holds only if nobody else writes: look again as we go."""
    free = free_bytes(folder)
    if free < MIN_FREE_BYTES:
        raise DiskNearlyFull(errno.ENOSPC, f"only {free / 2**20:.0f} MiB left on the file system")


def write_formats(
    spec: DatasetSpec, dataset_dir: Path, options: dict[str, Any], reporter: Reporter
) -> tuple[list[FormatJob], dict]:
    """Write all formats in options (resolved: `prepare.plan` resolves them, and refuses, before anything
    is created); returns the finished jobs (still in partial directories).

    On any error or interruption every partial directory is removed before the exception
    propagates.
    """
    jobs: list[FormatJob] = []
    hasher = ContentHasher()
    try:
        for name, opts in options.items():
            jobs.append(
                FormatJob(
                    name,
                    opts,
                    make_partial_dir(dataset_dir, name),
                    in_process=FORMATS[name].python_bound_writer and len(options) > 1,
                )
            )
        for job in jobs:
            reporter.start(f"{job.name}:write", f"{job.name} write", spec.payload_bytes)
        for job in sorted(jobs, key=lambda j: not j.in_process):  # fork before starting threads
            job.start(spec, reporter)
        for chunk in generate(spec):
            check_room(dataset_dir)
            hasher.update(chunk.features, chunk.labels)
            for job in jobs:
                job.feed(chunk)
        for job in jobs:
            job.feed(None)
        for job in jobs:
            job.join()
        for job in jobs:
            if job.error is not None:
                raise job.error
    except BaseException:
        for job in jobs:
            job.cancel()
        for job in jobs:
            shutil.rmtree(job.partial, ignore_errors=True)
        raise
    return jobs, hasher.digest()
