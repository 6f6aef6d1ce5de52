"""Linux mechanisms the measuring and the data side both use: the page cache (eviction, residency) and
whether a process is still there.

The first rooms of the system layer; AIO, cgroups and /proc counters still live in iobench/run/."""
