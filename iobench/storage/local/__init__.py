"""A folder on this machine's disk as a run's storage: cold is the page cache emptied of the format's files
(drop_caches as root, posix_fadvise otherwise) and checked with mincore(); what moved is the kernel's count of
bytes read from the data's block device and by the run's processes; its controls are a read throttle and a
page-cache budget, each a cgroup around the run; its ceilings are the disk's sequential and random reads."""

from __future__ import annotations

from iobench.storage.local.folder import LocalStorage, StorageCeilings

__all__ = ["LocalStorage", "StorageCeilings"]
