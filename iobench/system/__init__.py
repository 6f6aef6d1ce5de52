"""Linux mechanisms the measuring and the data side both use: the page cache, AIO, cgroups and the
cache governor, /proc counters, rival processes, signals, filesystem helpers and host facts. Imports
nothing of iobench above spec and units (results' record types aside, for host facts)."""
