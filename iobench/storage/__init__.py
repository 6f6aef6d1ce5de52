"""Where a format's bytes live: one `Storage` per run says how a reader reaches the format's files, what cold
means there and how to get there, what moved (bytes and requests), and how fast it can go.

`LocalStorage` (iobench.storage.local) is a folder on this machine: the page cache, the kernel's read counters
and cgroups for a read throttle and a cache budget. A second kind of storage is an implementation of this
protocol, not a change to the runner: the runner asks only `make_cold`, `residency`, `counters` and `controls`.
Light on purpose: nothing heavy is imported here.
"""

from __future__ import annotations

from iobench.storage.base import (
    COLD_RESIDENCY_LIMIT,
    NO_HINTS,
    Applied,
    Counters,
    ReadHints,
    Storage,
)

__all__ = ["COLD_RESIDENCY_LIMIT", "NO_HINTS", "Applied", "Counters", "ReadHints", "Storage"]
