"""torchdata.nodes with threads (`--loader nodes`): what PyTorch now points to when worker processes cost
more than they bring (start-up, pickling, shared-memory hand-over), as on the study's 2 cores.

The pipeline is the one its documentation composes: the epoch's indices -> `ParallelMapper(method="thread")`
reading (per sample, then `Batcher` and collate, with `--fetch item`; a whole batch per call with the
default `--fetch batch`) -> `PinMemory` when pinning -> `Prefetcher` (`--prefetch-factor` batches). `--num-workers` is
the number of threads (0: read in the calling thread), `--no-in-order` hands batches over as they finish.
Each thread reads through its own copy of the format's reader (a reader's handles are its process's, and
not every library's handle may be used from two threads at once); LMDB, which allows one opening per
process, is shared and keeps a read transaction per thread.
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
from iobench.loaders.order import indices_of
from iobench.loaders.threads import ThreadReaders
from iobench.loaders.transforms import Transform
from iobench.settings import Fetch, batches_ahead


class ThreadDatasets:
    """A ReaderDataset per thread over that thread's reader (`ThreadReaders`)."""

    def __init__(self, reader: FormatReader, transform: Transform | None, carry: bool = True) -> None:
        self._readers = ThreadReaders(reader)
        self._transform, self._carry = transform, carry
        self._local = threading.local()

    def read(self, key: Any) -> Any:
        """A batch (an index array or slice) or one sample (an int), with its indices carried."""
        dataset = getattr(self._local, "dataset", None)
        if dataset is None:
            dataset = ReaderDataset(self._readers.reader(), self._transform, carry=self._carry)
            self._local.dataset = dataset
        return dataset[key]

    def close(self) -> None:
        self._readers.close()
        self._local = threading.local()


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
        self.readers = ThreadDatasets(ctx.reader, ctx.transform, carry=self._carries(ctx))
        self._loader: Any = None

    def _keys(self, epoch: int) -> Iterator[Any]:
        for window in self.order.batches(epoch):
            if self.settings.fetch is Fetch.ITEM:
                yield from (int(i) for i in indices_of(window))
            else:
                yield window

    def epoch(self, epoch: int) -> Iterator[Any]:
        from torchdata import nodes

        s = self.settings
        node: Any = nodes.IterableWrapper(self._keys(epoch))
        node = nodes.ParallelMapper(node, self.readers.read, num_workers=s.num_workers, in_order=s.in_order,
                                    method="thread")  # fmt: skip
        if s.fetch is Fetch.ITEM:
            node = nodes.Mapper(nodes.Batcher(node, batch_size=s.batch_size, drop_last=False), default_collate)
        if s.pin_memory:
            node = nodes.PinMemory(node)
        node = nodes.Prefetcher(node, batches_ahead(s))
        self._loader = self._restored(nodes.Loader(node))
        return self._carrying(iter(self._loader))

    def state_dict(self) -> dict[str, Any] | None:
        return self._loader.state_dict() if self._loader is not None else None

    def close(self) -> None:
        self.readers.close()
        self.reader.close()
