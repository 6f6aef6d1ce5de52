#!/usr/bin/env bash
# Drop the page cache (and dentries/inodes) before a cold measurement, for those who prefer to run
# only this with sudo:   sudo scripts/drop_caches.sh && iobench run --cache as-is ...
# `iobench run --cache cold` does the same itself when run as root, and otherwise evicts the
# dataset's files with posix_fadvise(DONTNEED).
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
    echo "drop_caches.sh: needs root (try: sudo $0)" >&2
    exit 2
fi
sync
echo 3 > /proc/sys/vm/drop_caches
echo "page cache dropped"
