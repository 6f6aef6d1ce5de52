"""Write one generated stream into several formats at once, each in its own thread.

The dataset is generated and content-hashed once; every chunk goes to one queue per format. Each
format's thread writes, closes, fsyncs and checksums its partial directory. Threads overlap where
the work releases the GIL (file writes, SHA-256, lz4, HDF5 I/O), which on a small machine is what
keeps prepare near the disk's speed.
"""

from __future__ import annotations

import datetime as dt
import queue
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats import FORMATS
from formats.base import FormatWriter
from iobench.dataset import Chunk, ContentHasher, DatasetSpec, generate
from iobench.fsutil import fsync_tree, make_partial_dir, sha256_file
from iobench.manifest import FileEntry, FormatEntry
from iobench.progress import Reporter

QUEUE_CHUNKS = 4  # how far one format may lag behind the generator: bounds memory


@dataclass
class FormatJob:
    name: str
    options: Any
    partial: Path
    reporter: Reporter
    chunks: queue.Queue = field(default_factory=lambda: queue.Queue(QUEUE_CHUNKS))
    error: BaseException | None = None
    entry: FormatEntry | None = None
    thread: threading.Thread | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)

    def run(self, spec: DatasetSpec) -> None:
        try:
            self.entry = self._write(spec)
        except BaseException as exc:  # reported by the main thread
            self.error = exc
            self.cancelled.set()

    def _write(self, spec: DatasetSpec) -> FormatEntry:
        fmt = FORMATS[self.name]
        key = f"{self.name}:write"
        busy = 0.0
        t = time.perf_counter()
        writer: FormatWriter = fmt.writer(self.partial, spec, self.options)
        try:
            busy += time.perf_counter() - t
            while (chunk := self.chunks.get()) is not None:
                if self.cancelled.is_set():
                    return None  # type: ignore[return-value]
                t = time.perf_counter()
                writer.write(chunk)
                busy += time.perf_counter() - t
                self.reporter.advance(key, chunk.nbytes)
        finally:
            t = time.perf_counter()
            writer.close()
            busy += time.perf_counter() - t
        t = time.perf_counter()
        fsync_tree(self.partial)
        busy += time.perf_counter() - t
        t = time.perf_counter()
        files = self._checksums(writer, fmt.ignored_files)
        entry = FormatEntry(
            name=self.name,
            directory=self.name,
            options=fmt.options_to_json(self.options),
            files=files,
            write_seconds=busy,
            checksum_seconds=time.perf_counter() - t,
            created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        )
        self.reporter.finish(key, f"{self.name} {entry.bytes / 1e6:,.0f} MB, {entry.write_mb_per_s:,.0f} MB/s")
        return entry

    def _checksums(self, writer: FormatWriter, ignored: frozenset[str]) -> list[FileEntry]:
        """Files the writer hashed as it wrote them are not read again; the rest are."""
        known = writer.digests()
        paths = sorted(p for p in self.partial.rglob("*") if p.is_file() and p.name not in ignored)
        rel = {p: p.relative_to(self.partial).as_posix() for p in paths}
        unknown = [p for p in paths if rel[p] not in known]
        key = f"{self.name}:checksum"
        if unknown:
            self.reporter.start(key, f"{self.name} checksum", sum(p.stat().st_size for p in unknown))
        digests = {rel[p]: sha256_file(p, lambda n: self.reporter.advance(key, n)) for p in unknown}
        digests.update(known)
        return [FileEntry(rel[p], p.stat().st_size, digests[rel[p]]) for p in paths]


def write_formats(
    spec: DatasetSpec, dataset_dir: Path, options: dict[str, Any], reporter: Reporter
) -> tuple[list[FormatJob], dict]:
    """Write all formats in options from one generated stream; partial directories on return.

    Returns the finished jobs (entry and partial directory each) and the content checksum. On any
    error or interruption every partial directory is removed before the exception propagates.
    """
    jobs = [
        FormatJob(name, FORMATS[name].resolve_options(spec, opts), make_partial_dir(dataset_dir, name), reporter)
        for name, opts in options.items()
    ]
    hasher = ContentHasher()
    try:
        for job in jobs:
            reporter.start(f"{job.name}:write", f"{job.name} write", spec.payload_bytes)
            job.thread = threading.Thread(target=job.run, args=(spec,), name=f"write-{job.name}", daemon=True)
            job.thread.start()
        for chunk in generate(spec):
            hasher.update(chunk.features, chunk.labels)
            _dispatch(jobs, chunk)
        _dispatch(jobs, None)
        for job in jobs:
            job.thread.join()
        for job in jobs:
            if job.error is not None:
                raise job.error
    except BaseException:
        for job in jobs:
            job.cancelled.set()
        for job in jobs:
            _drain(job)
            if job.thread is not None:
                job.thread.join(timeout=10)
            shutil.rmtree(job.partial, ignore_errors=True)
        raise
    return jobs, hasher.digest()


def _dispatch(jobs: list[FormatJob], chunk: Chunk | None) -> None:
    for job in jobs:
        while True:
            if job.cancelled.is_set():
                raise job.error or RuntimeError(f"{job.name} writer stopped")
            try:
                job.chunks.put(chunk, timeout=0.1)
                break
            except queue.Full:
                continue


def _drain(job: FormatJob) -> None:
    """Unblock a writer thread waiting for chunks so it can close its files and stop."""
    try:
        while True:
            job.chunks.get_nowait()
    except queue.Empty:
        pass
    try:
        job.chunks.put_nowait(None)
    except queue.Full:
        pass
