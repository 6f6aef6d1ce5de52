"""Who stops what, and in which order: a loader's threads stop before the readers they read close.

A thread pipeline (torchdata.nodes, SPDL, the prefetch thread, the fetch threads) keeps reading after its consumer
stops iterating: breaking out of a nodes epoch leaves its `Prefetcher` and `ParallelMapper` threads running until
their `__del__`. A reader closed under them (npy's memory map: `_mmap.close()`) is a SIGSEGV, not an exception; an
LMDB environment closed under them is reopened by the next read, and the next loader's opening of the same files is
refused ("environment is already open in this process"). So:

- every read by a thread a loader does not run itself enters a `ReadGate`;
- the loader stops its library's threads (`Loader._stop`), then shuts the gate: no read starts after that (nor
  reopens a shared handle), and the reads in flight are waited for, at most `STOP_S`;
- only then are the readers closed, once, by their owner. A thread that does not stop in time is said in one line
  and its reader is left open (a leak, not a crash).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

# How long a loader waits for its threads to stop (and their reads in flight to end) before it leaves their readers
# open and says so: short enough that Ctrl-C still ends a run within 2 s, long enough for a batch being read.
STOP_S = 1.5


class ReaderClosed(RuntimeError):
    """A read asked of a reader whose loader has closed it (a library thread that had not yet seen the stop)."""


class ReadGate:
    """The reads in flight through a set of readers shared with threads, counted; `shut` refuses new ones and waits,
    bounded, for those in flight. `reopen` lets reads in again (a loader's next epoch)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._in_flight = 0
        self._shut = False

    @contextmanager
    def entered(self) -> Iterator[None]:
        with self._changed:
            if self._shut:
                raise ReaderClosed("the loader has stopped: no more reads")
            self._in_flight += 1
        try:
            yield
        finally:
            with self._changed:
                self._in_flight -= 1
                if not self._in_flight:
                    self._changed.notify_all()

    @property
    def is_shut(self) -> bool:
        return self._shut

    def shut(self, timeout: float = STOP_S) -> bool:
        """No read starts from now on; True once none is in flight, False if some still were after `timeout`."""
        with self._changed:
            self._shut = True
            return self._changed.wait_for(lambda: self._in_flight == 0, timeout)

    def reopen(self) -> None:
        with self._changed:
            self._shut = False


def join_all(threads: Iterable[threading.Thread], timeout: float = STOP_S) -> list[threading.Thread]:
    """Join each thread within one shared deadline; the ones still alive after it."""
    deadline = time.monotonic() + timeout
    alive = []
    for thread in threads:
        if thread is threading.current_thread() or thread.ident is None:  # itself, or never started
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            alive.append(thread)
    return alive


def unstopped(what: str) -> None:
    """One line on stderr: a library's thread that would not stop in time, and what was left open because of it."""
    sys.stderr.write(f"iobench: warning: {what}\n")
    sys.stderr.flush()
