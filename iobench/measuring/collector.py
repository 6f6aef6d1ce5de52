"""Python's garbage collector kept off the harness while a clock runs."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def harness_out_of_the_collector() -> Iterator[None]:
    """The objects that exist before the clock starts (iobench's own: its modules, its records, its CLI; and the
    pipeline's setup) frozen out of Python's garbage collector while it runs (`gc.freeze`), which collects what the
    timed work allocates as it would in any loop. Without it a full collection inside the clock scanned iobench's
    heap: LitData's remote path, whose chunk download builds a boto3 client, took 0.26 s instead of 0.08 s for that
    client and ran at 0.67-0.79x of its own loop's samples/s (1.2x with the collector off in both); a steady
    `torch.save` of 0.25 GiB took 0.33-0.36 s in a checkpoint trial against 0.25-0.26 s in torch's own loop, by
    whether a full collection fell inside it (one more module imported decided it)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
