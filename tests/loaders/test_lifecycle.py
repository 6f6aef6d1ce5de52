"""The loaders' stopping order (`iobench.loaders.lifecycle`): a loader's threads stop, and the reads they have in flight
end, before any reader they read is closed; a read asked after that is refused, never served by a reopened handle.

A reader that notices being closed under a read stands in for npy's memory map (closed under a read: SIGSEGV) and
LMDB's environment (reopened by a late read: the next loader's opening refused). Its reads are slow, so that a
thread is always mid-read when the consumer stops: every registered loader that reads through the reader it is
given (in this process) is checked, for each way an epoch ends."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest
import torch

from iobench.errors import IobenchError
from iobench.formats.base import FormatReader, ReaderTraits
from iobench.loaders import LOADERS
from iobench.loaders.base import LoaderContext
from iobench.loaders.factory import make_loader
from iobench.loaders.order import EpochOrder
from iobench.settings import LoaderSettings
from iobench.spec import DatasetSpec

N, BATCH = 4096, 64
READ_S = 0.03  # each read holds its handle this long: the window in which a close would land


class Watch:
    """What the readers saw, shared by every copy a loader makes of one (a shallow copy shares it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.reads = 0
        self.closed_under_a_read = 0
        self.read_after_close = 0
        self.opened = 0


class _Handle:
    def __init__(self) -> None:
        self.open = True


class WatchedReader(FormatReader):
    """Reads zeros slowly, holding its handle; counts a close that lands during a read and a read on a closed
    handle. `share` picks how threads read it: shared (npy's mappings, LMDB's one opening) or one copy each."""

    def __init__(self, watch: Watch, share: bool) -> None:
        super().__init__("/nonexistent", DatasetSpec(N, shape=(4,)), None)
        self.watch, self.traits = watch, ReaderTraits(threads_share=share)  # type: ignore[misc]

    def _local_directory(self) -> None:
        return None

    def _open(self) -> _Handle:
        with self.watch.lock:
            self.watch.opened += 1
        return _Handle()

    def _close(self, handle: _Handle) -> None:
        with self.watch.lock:
            if self.watch.in_flight:
                self.watch.closed_under_a_read += 1
        handle.open = False

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        handle = self.handle
        with self.watch.lock:
            self.watch.in_flight += 1
            self.watch.reads += 1
        try:
            time.sleep(READ_S)
            if not handle.open:
                with self.watch.lock:
                    self.watch.read_after_close += 1
            return np.zeros((len(indices), 4), np.float32), np.asarray(indices, dtype=np.int64)
        finally:
            with self.watch.lock:
                self.watch.in_flight -= 1


def _threaded_variants() -> list[Any]:
    """Every installed loader that reads any format through the reader it is given, with each setting it honours
    that starts threads: (loader, settings)."""
    found = []
    for kind in LOADERS.values():
        if not kind.installed or kind.own_readers or kind.only is not None or kind.needs is not None:
            continue
        base = {"num_workers": 2} if not kind.forks and "num_workers" in kind.honours else {}
        found.append(pytest.param(kind.name, base, id=f"{kind.name}"))
        if "prefetch_thread" in kind.honours:
            found.append(pytest.param(kind.name, {**base, "prefetch_thread": 2}, id=f"{kind.name}-prefetch_thread"))
        if "fetch_threads" in kind.honours:
            found.append(pytest.param(kind.name, {**base, "fetch_threads": 3}, id=f"{kind.name}-fetch_threads"))
    return found


def _loader(name: Any, settings: dict, watch: Watch, share: bool) -> Any:
    reader = WatchedReader(watch, share)
    ctx = LoaderContext(
        reader,
        EpochOrder(N, BATCH, shuffle=True),
        LoaderSettings(batch_size=BATCH, **settings),
        torch.device("cpu"),
        format_name="watched",
    )
    try:
        return make_loader(name, ctx)
    except (IobenchError, ValueError, NotImplementedError, KeyError, TypeError) as exc:
        pytest.skip(f"{name} does not read through a reader it is given in this process: {exc}")


def _clean(watch: Watch) -> None:
    assert watch.reads > 0
    assert watch.closed_under_a_read == 0, "a reader was closed while a thread read it"
    assert watch.read_after_close == 0, "a thread read through a closed handle"
    assert watch.in_flight == 0, "a read was still in flight after close()"


@pytest.mark.parametrize("share", [True, False], ids=["shared-reader", "reader-per-thread"])
@pytest.mark.parametrize(("name", "settings"), _threaded_variants())
@pytest.mark.parametrize("end", ["break", "close-mid-epoch", "exception", "next-epoch"])
def test_threads_stop_before_their_readers_close(name, settings, share, end):
    watch = Watch()
    loader = _loader(name, settings, watch, share)
    try:
        batches = loader.epoch(0)
        for k, _ in enumerate(batches):
            if end == "exception" and k == 1:
                with pytest.raises(KeyboardInterrupt):
                    try:
                        raise KeyboardInterrupt  # an interrupt mid-epoch: the consumer leaves, the loader is closed
                    finally:
                        loader.close()
                break
            if k == 2:
                break
        if end == "next-epoch":  # the loader's next epoch ends the one broken off before it reads
            batches = loader.epoch(1)
            next(iter(batches))
        if end == "close-mid-epoch":
            loader.close()  # without ending the epoch first: close() ends it
    finally:
        loader.close()
    _clean(watch)
    before = watch.reads
    time.sleep(3 * READ_S)
    assert watch.reads == before, "a thread went on reading after close()"


@pytest.mark.parametrize(("name", "settings"), _threaded_variants())
def test_a_shared_reader_is_not_reopened_by_a_late_read(name, settings):
    """LMDB allows one opening per process: a late read of a shared reader must not open it again after its owner
    closed it (the next loader's opening was refused)."""
    watch = Watch()
    loader = _loader(name, settings, watch, share=True)
    for k, _ in enumerate(loader.epoch(0)):
        if k == 1:
            break
    loader.close()
    opened = watch.opened
    time.sleep(3 * READ_S)
    assert watch.opened == opened


def test_the_gate_waits_for_reads_in_flight_and_refuses_new_ones():
    from iobench.loaders.lifecycle import ReaderClosed, ReadGate

    gate = ReadGate()
    started, release = threading.Event(), threading.Event()

    def read() -> None:
        with gate.entered():
            started.set()
            release.wait(5)

    reader = threading.Thread(target=read)
    reader.start()
    started.wait(5)
    assert gate.shut(timeout=0.05) is False  # a read is in flight: not drained within the bound
    with pytest.raises(ReaderClosed):
        with gate.entered():
            pass
    release.set()
    assert gate.shut(timeout=5) is True
    reader.join(5)
    gate.reopen()
    with gate.entered():
        pass


def test_join_all_shares_one_deadline():
    from iobench.loaders.lifecycle import join_all

    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait, args=(10,)) for _ in range(4)]
    for t in threads:
        t.start()
    started = time.monotonic()
    alive = join_all(threads, timeout=0.2)
    assert len(alive) == 4 and time.monotonic() - started < 1.0
    stop.set()
    assert join_all(threads, timeout=5) == []
