"""The cache budget's governor: a process of its own, outside the budgeted cgroup.

`python -m iobench.storage.local.cache_governor GROUP VERSION BUDGET` keeps GROUP's limit at what the group
holds other than file cache plus BUDGET bytes, every 10 ms, until a line arrives on its stdin (the run
ended) or stdin closes (its process died); then it lifts the limit and prints the most file cache it
saw. A line, not only EOF: DataLoader workers forked by the run inherit the pipe's write end, so the
run closing its own copy does not close the pipe. It must not
be inside the group: a thread of the measured process would be charged to the group and could wait
on the very limit it is meant to raise (seen: a deadlock at the first page fault after a cold
eviction).
"""

from __future__ import annotations

import errno
import select
import sys
from pathlib import Path

POLL_SECONDS = 0.01
# Room the limit always leaves above current use: the kernel's own allocations (the page tables and
# task structures of a forked DataLoader worker) are charged to the group and fail with ENOMEM at the
# limit instead of waiting for reclaim. File cache may use it too, so the cache can exceed the budget
# by up to this much; records show the peak actually held.
HEADROOM = 4 * 2**20


class Governor:
    def __init__(self, group: Path, version: int, budget: int) -> None:
        self.group, self.budget = group, budget
        self.usage = group / ("memory.usage_in_bytes" if version == 1 else "memory.current")
        self.limit = group / ("memory.limit_in_bytes" if version == 1 else "memory.high")
        self.unlimited = "-1" if version == 1 else "max"
        self.peak_cache = 0

    def adjust(self) -> None:
        usage = int(self.usage.read_text())
        stat = dict(line.split() for line in (self.group / "memory.stat").read_text().splitlines())
        cache = int(stat.get("active_file", 0)) + int(stat.get("inactive_file", 0))
        self.peak_cache = max(self.peak_cache, cache)
        try:
            self.limit.write_text(str(usage - cache + self.budget + HEADROOM))
        except OSError as exc:
            if exc.errno != errno.EBUSY:  # EBUSY (v1): not reclaimed down to it yet; next time
                raise

    def lift(self) -> None:
        self.limit.write_text(self.unlimited)


def main(argv: list[str]) -> int:
    group, version, budget = Path(argv[0]), int(argv[1]), int(argv[2])
    governor = Governor(group, version, budget)
    failure = ""
    try:
        governor.adjust()
        print("ready", flush=True)
        while True:
            readable, _, _ = select.select([sys.stdin], [], [], POLL_SECONDS)
            if readable:  # "stop", or EOF
                break
            governor.adjust()
    except (OSError, ValueError) as exc:
        failure = str(exc).replace("\n", " ")
    finally:
        try:
            governor.lift()
        except OSError:
            pass  # the group is gone
    try:
        print(f"peak {governor.peak_cache} {failure}", flush=True)
    except BrokenPipeError:  # the run was killed: nobody is left to tell, and nothing to say on stderr
        sys.stdout = None
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
