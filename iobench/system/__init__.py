"""Linux mechanisms the measuring and the data side both use: the page cache (eviction, residency).

The first room of the system layer; AIO, cgroups and /proc counters still live in iobench/run/."""
