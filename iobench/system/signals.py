"""Holding SIGINT/SIGTERM while a process forks, then delivering them.

An interrupt that lands inside fork()'s at-fork handlers (logging's lock release, for one) leaves
a lock held in the parent: the next thread that logs, or h5py's global lock waiting on it, hangs
for good, and a second Ctrl-C is never seen. While a child starts, the Python-level handlers only
note the signal; the original handler runs as soon as the fork is done.
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType, TracebackType
from typing import Any

HELD = (signal.SIGINT, signal.SIGTERM)


class Ending:
    """Whether the command is being ended by SIGINT or SIGTERM, and by which first (the command line's handler says
    so): what stops at exit takes its quick way then (servers ended by their guard, not waited for), so the run ends
    within seconds; a failure a library made of the interruption is read as the interruption; the exit code is 128
    plus the signal, as a shell reports it."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self.signum: int | None = None

    def set(self, signum: int = signal.SIGINT) -> None:
        if self.signum is None:
            self.signum = signum
        self._set.set()

    def is_set(self) -> bool:
        return self._set.is_set()

    def clear(self) -> None:
        self.signum = None
        self._set.clear()


ENDING = Ending()
REDELIVER_AFTER_S = 0.01  # an interrupt lost in a finaliser comes back once the finaliser has returned


@contextmanager
def signals_held() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers can only be changed (and only run) in the main thread
        return
    received: list[tuple[int, FrameType | None]] = []
    previous = {s: signal.getsignal(s) for s in HELD}

    def hold(signum: int, frame: FrameType | None) -> None:
        received.append((signum, frame))

    for s in HELD:
        signal.signal(s, hold)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if received:
            signum, frame = received[0]
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)


def _raised_in(tb: TracebackType | None, filename: str) -> bool:
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(filename):
            return True
        tb = tb.tb_next
    return False


def quiet_interrupted_handover(
    previous: Callable[[type[BaseException], BaseException, TracebackType | None], object],
) -> Callable[[type[BaseException], BaseException, TracebackType | None], object]:
    """A `sys.excepthook` that drops one report: a DataLoader worker's file-descriptor server (multiprocessing's
    resource_sharer thread, which reports through sys.excepthook) whose peer went away because Ctrl-C stopped
    the run. Nothing is lost with it; every other report goes to `previous`. Forked workers inherit it."""

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> object:
        if issubclass(kind, (ConnectionError, EOFError)) and _raised_in(tb, "multiprocessing/resource_sharer.py"):
            return None
        return previous(kind, value, tb)

    return hook


def redeliver_lost_interrupt(
    previous: Callable[[Any], object], ending: Callable[[], bool] = lambda: False
) -> Callable[[Any], object]:
    """A `sys.unraisablehook`: an interrupt raised by the signal handler while a finaliser ran (a multiprocessing
    Connection's `__del__`, called by the garbage collector) cannot propagate. Python would print it as "Exception
    ignored" with a traceback and carry on with the work; instead it is delivered again to the main thread, where it
    stops the work: a moment later, from another thread, since delivered at once the handler would raise inside
    this hook, no better placed to propagate it. Every other report goes to `previous`."""

    def hook(unraisable: Any) -> object:
        if ending() and _worker_killed(unraisable.exc_value):
            return None  # the signal that ends the command reached the workers too: nothing to report
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            later = threading.Timer(REDELIVER_AFTER_S, _thread.interrupt_main, args=(signal.SIGINT,))
            later.daemon = True
            with suppress(RuntimeError):  # no new thread while the interpreter shuts down: nothing left to stop
                later.start()
            return None
        return previous(unraisable)

    return hook


def _worker_killed(exc: BaseException | None) -> bool:
    """torch's words for a DataLoader worker a signal ended, raised in the iterator's finaliser: a SIGTERM to the
    process group (a job scheduler's stop) printed it as "Exception ignored in __del__" with a traceback."""
    return isinstance(exc, RuntimeError) and "DataLoader worker" in str(exc) and "killed by signal" in str(exc)


TERMINATE_GRACE_S = 10.0  # after SIGTERM, how long the main thread has to end the run before the process exits


def exit_when_stuck(grace_s: float = TERMINATE_GRACE_S) -> None:
    """Make SIGTERM end the process even when the main thread cannot run its handler: a call into a library that
    does not return to Python (obstore waiting on a store that never answers, a read of a FUSE mount whose server
    stalled) held a run for minutes. The signal is seen at C level through the wakeup fd; a watching thread waits
    `grace_s` for the main thread to end the run its usual way (records kept, servers stopped), then says so in one
    line and exits with 143. The servers, mounts and workers die with the process (they are told to), and what
    they left in iobench's own folder is removed by the next start. Call from the main thread, once."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        os.close(read)
        os.close(write)
        return

    def watch() -> None:
        while True:
            try:
                data = os.read(read, 64)
            except OSError:
                return
            if signal.SIGTERM in data:
                time.sleep(grace_s)
                os.write(2, b"iobench: terminated; a read that did not return in time was abandoned\n")
                os._exit(128 + signal.SIGTERM)

    threading.Thread(target=watch, name="iobench-sigterm-watch", daemon=True).start()
    os.register_at_fork(after_in_child=_forget_wakeup)


def _forget_wakeup() -> None:
    """In a forked child (a DataLoader worker): a signal to it must not reach the parent's watching thread through
    the inherited wakeup fd (torch ends a slow worker with SIGTERM)."""
    with suppress(ValueError):
        signal.set_wakeup_fd(-1)
