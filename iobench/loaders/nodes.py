"""torchdata.nodes with threads (`--loader nodes`): what PyTorch now points to when worker processes cost
more than they bring (start-up, pickling, shared-memory hand-over), as on the study's 2 cores.

The pipeline is the one its documentation composes: the epoch's indices -> `ParallelMapper(method="thread")`
reading (per sample, then `Batcher` and collate, with `--fetch item`; a whole batch per call with the
default `--fetch batch`) -> `PinMemory` when pinning -> `Prefetcher` (`--prefetch-factor` batches). `--num-workers` is
the number of threads (0: read in the calling thread), `--no-in-order` hands batches over as they finish.
Each thread reads through its own copy of the format's reader (a reader's handles are its process's, and
not every library's handle may be used from two threads at once); LMDB, which allows one opening per
process, is shared and keeps a read transaction per thread.

nodes' threads do not stop when their consumer stops iterating (they stop in their iterators' `__del__`): the end,
break or interruption of an epoch shuts the graph down as nodes' own `reset()` does, joins its threads and waits for
the reads in flight (`iobench.loaders.lifecycle`) before any reader is closed.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from torch.utils.data import default_collate

from iobench.formats.base import FormatReader
from iobench.loaders.base import Loader, LoaderContext, Resumable
from iobench.loaders.dataloader import CarriedWhenNeeded, ReaderDataset
from iobench.loaders.lifecycle import STOP_S, join_all, unstopped
from iobench.loaders.order import indices_of
from iobench.loaders.threads import ThreadReaders
from iobench.loaders.transforms import Transform
from iobench.settings import DecodeOn, Fetch, batches_ahead


class ThreadDatasets:
    """A ReaderDataset per thread over that thread's reader (`ThreadReaders`)."""

    def __init__(
        self, reader: FormatReader, transform: Transform | None, carry: bool = True, encoded: bool = False
    ) -> None:
        self._readers = ThreadReaders(reader)
        self._transform, self._carry, self._encoded = transform, carry, encoded
        self._local = threading.local()

    def read(self, key: Any) -> Any:
        """A batch (an index array or slice) or one sample (an int), with its indices carried; refused once stopped."""
        with self._readers.reading():
            dataset = getattr(self._local, "dataset", None)
            if dataset is None:
                dataset = ReaderDataset(
                    self._readers.reader(), self._transform, carry=self._carry, encoded=self._encoded
                )
                self._local.dataset = dataset
            return dataset[key]

    def stop(self) -> bool:
        """No read starts from now on; True once none is in flight."""
        return self._readers.stop()

    def restart(self) -> None:
        self._readers.restart()

    def close(self) -> bool:
        """The threads' copies closed once their reads are done; False (nothing closed) while one still reads."""
        closed = self._readers.close()
        if closed:
            self._local = threading.local()
        return closed


# Where a nodes graph keeps its parts and its threads (torchdata 0.11): a Loader's root in `root` and its iterator in
# `_it`, a node's running iterator in `_it`, its input in `source`; an iterator's threads in `_thread` (Prefetcher,
# PinMemory), `_read_thread`, `_sort_thread` and `_workers` (ParallelMapper), and the events that stop them.
_PARTS = ("root", "_it", "source")
_THREADS = ("_thread", "_read_thread", "_sort_thread")
_STOPS = ("_stop", "_mp_stop", "_stop_event")


def shut_down(loader: Any) -> list[threading.Thread]:
    """Tell every thread of a nodes graph to stop, all at once (no stage then waits on one that still produces), as
    the iterators' own `_shutdown` does before it joins each thread for up to 0.5 s; the threads, for the caller to
    join within one deadline. An iterator without those events is shut down by its own `_shutdown`."""
    chain: list[Any] = []
    seen: set[int] = set()
    todo = [loader]
    while todo:
        part = todo.pop()
        if part is None or id(part) in seen:
            continue
        seen.add(id(part))
        chain.append(part)
        todo.extend(getattr(part, name, None) for name in _PARTS)
    threads: list[threading.Thread] = []
    for part in chain:
        events = [e for name in _STOPS if callable(getattr(e := getattr(part, name, None), "set", None))]
        for event in events:
            event.set()
        if not events and callable(shutdown := getattr(part, "_shutdown", None)):
            shutdown()
        threads += [t for name in _THREADS if isinstance(t := getattr(part, name, None), threading.Thread)]
        threads += [t for t in getattr(part, "_workers", ()) if isinstance(t, threading.Thread)]
    return threads


def _is_self_join(args: Any) -> bool:
    """torchdata 0.11's nodes stop their threads in `__del__`; when an epoch is cut short (tune's first
    round), one of those threads may drop the last reference and run it, and joining itself raises. The
    stop flag is set before the join, so the threads end all the same: only the printed traceback goes."""
    owner = getattr(args.object, "__module__", "") or ""
    return (
        args.exc_type is RuntimeError
        and str(args.exc_value) == "cannot join current thread"
        and owner.startswith("torchdata.nodes")
    )


def _quiet_self_joins() -> None:
    """Drops exactly that unraisable exception; every other one reaches the hook that was there."""
    report: Callable[[Any], None] = sys.unraisablehook
    if getattr(report, "iobench_self_joins", False):
        return

    def hook(args: Any) -> None:
        if not _is_self_join(args):
            report(args)

    hook.iobench_self_joins = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


class NodesLoader(CarriedWhenNeeded, Resumable, Loader):
    def __init__(self, ctx: LoaderContext) -> None:
        super().__init__(ctx.order, ctx.settings, ctx.device)
        _quiet_self_joins()
        self.reader = ctx.reader
        # carrying in order cost a stack per batch in the reading thread: 3.5% of SPDL's rows/s (1,024 rows of 512 B)
        self.readers = ThreadDatasets(
            ctx.reader, ctx.transform, carry=self._carries(ctx), encoded=ctx.settings.decode_on is DecodeOn.DEVICE
        )
        self._loader: Any = None

    def _keys(self, epoch: int) -> Iterator[Any]:
        for window in self.order.batches(epoch):
            if self.settings.fetch is Fetch.ITEM:
                yield from (int(i) for i in indices_of(window))
            else:
                yield window

    def _batches(self, epoch: int) -> Iterator[Any]:
        from torchdata import nodes

        self.readers.restart()
        s = self.settings
        node: Any = nodes.IterableWrapper(self._keys(epoch))
        node = nodes.ParallelMapper(
            node, self.readers.read, num_workers=s.num_workers, in_order=s.in_order, method="thread"
        )
        if s.fetch is Fetch.ITEM:
            node = nodes.Mapper(nodes.Batcher(node, batch_size=s.batch_size, drop_last=False), default_collate)
        if s.pin_memory:
            node = nodes.PinMemory(node)
        node = nodes.Prefetcher(node, batches_ahead(s))
        self._loader = self._restored(nodes.Loader(node))
        return self._carrying(iter(self._loader))

    def state_dict(self) -> dict[str, Any] | None:
        return self._loader.state_dict() if self._loader is not None else None

    def _stop(self) -> bool:
        """nodes' threads shut down and joined, then the reads in flight waited for (both within `STOP_S`)."""
        alive = join_all(shut_down(self._loader)) if self._loader is not None else []
        return self._drained("torchdata.nodes", alive)

    def _drained(self, library: str, alive: list[threading.Thread]) -> bool:
        """The reads of the library's threads stopped; one line where a thread still runs or reads."""
        if not self.readers.stop():
            unstopped(f"a {library} thread was still reading after {STOP_S:g} s; its reader is left open")
            return False
        if alive:  # reading nothing (the gate is shut and empty), but not yet ended: harmless, said
            unstopped(f"{len(alive)} {library} thread(s) did not end within {STOP_S:g} s (they read nothing more)")
        return True

    def _release(self) -> None:
        if self.readers.close():
            self.reader.close()
