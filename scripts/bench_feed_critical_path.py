"""Which waits for a CPU lengthened a feed count's epoch beside other programs (issue 91's open question)?

`feed` beside busy loops gives back each rank's waits for a CPU to say what a quiet machine would have fed: the step
loop's wait, and its loader workers' mean wait up to the time the loop was blocked for their batches. Beside one busy
loop that matched quiet within 0.01-0.02 of AU; beside two it gave back 0.03-0.05 more than quiet measured, so a count
carried over the threshold by given-back waits alone is now undecided. This prototype measures, per batch, what the
worker that produced it waited for a CPU while producing it (its own thread's schedstat, handed back beside the batch)
and how long the loop was blocked for that batch: only min(blocked, the producer's wait + the loop's own wait while
blocked) lengthened the epoch, and the loop's wait outside the hand-over always did. Both credits, the rule's and the
per-batch one, scaled by other programs' share of the CPU used over the epoch as feed's are, are set against the AU
measured quiet in the alternating trial beside it.

The workload is the shared-machine study's feed question (100 kB samples, batch 64, a 40 ms step, one worker a rank,
warm): N ranks, each its own process reading its shard of one file through a DataLoader, no barrier between steps.

    python scripts/bench_feed_critical_path.py --ranks 1,4 --busy 1,2 --trials 3
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
from workdir import remove_work, work_dir

from iobench.system.waits import thread_times_s

SAMPLE, BATCH, STEP_S, WORKERS = 100_000, 64, 0.040, 1
IDLE_GAP_S = 0.001  # a worker that started a batch within this of ending the one before was not idle between


class Shard(Dataset):
    """A rank's batches of its shard, each handed back with what producing it cost the worker: (wait, cpu) s."""

    def __init__(self, path: Path, rows: np.ndarray) -> None:
        self.path, self.rows, self.data = path, rows, None
        self.carried, self.last_end = 0.0, 0.0

    def __len__(self) -> int:
        return len(self.rows) // BATCH

    def __getitem__(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        started = time.perf_counter()
        cpu0, wait0 = thread_times_s()
        if self.data is None:  # opened in the worker
            self.data = np.memmap(self.path, dtype=np.uint8, mode="r").reshape(-1, SAMPLE)
        x = torch.from_numpy(np.ascontiguousarray(self.data[np.sort(self.rows[k * BATCH : (k + 1) * BATCH])]))
        cpu1, wait1 = thread_times_s()
        # back to back with the batch before (no idle gap): that batch's lateness carries into this one's
        self.carried = (self.carried if started - self.last_end < IDLE_GAP_S else 0.0) + (wait1 - wait0)
        self.last_end = time.perf_counter()
        return x, torch.tensor([wait1 - wait0, cpu1 - cpu0, self.carried], dtype=torch.float64)


def busy_jiffies() -> int:
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4]  # all but idle and iowait


def rank_epochs(path: Path, rows: np.ndarray, epochs: int, out: mp.Queue) -> None:
    loader = DataLoader(Shard(path, rows), batch_size=None, shuffle=True, num_workers=WORKERS, persistent_workers=True)
    for epoch in range(epochs + 1):  # the first: a warm-up
        blocked = lost = loop_wait_outside = producers_wait = timeline = 0.0
        cpu_start, wait_start = thread_times_s()
        start = time.perf_counter()
        it = iter(loader)
        steps, woke_wait = 0, 0.0
        while True:
            t0, (_, w0) = time.perf_counter(), thread_times_s()
            try:
                _, meta = next(it)
            except StopIteration:
                break
            b, (_, w1) = time.perf_counter() - t0, thread_times_s()
            produced_wait, carried = float(meta[0]), float(meta[2])
            blocked += b
            producers_wait += produced_wait
            lost += min(b, produced_wait + (w1 - w0))
            # the step's timeline from the loop's wake: it waited `woke_wait` for a CPU, was blocked `b` of which it
            # waited `wb` once the batch was there; the batch was ready at x, and quiet `carried` earlier
            wb = w1 - w0
            x = woke_wait + b - wb
            timeline += max(woke_wait, x) + wb - max(0.0, x - carried)
            time.sleep(STEP_S)
            steps += 1
            woke_wait = thread_times_s()[1] - w1
            loop_wait_outside += woke_wait
        seconds = time.perf_counter() - start
        cpu, wait = (now - then for now, then in zip(thread_times_s(), (cpu_start, wait_start), strict=True))
        if epoch:
            out.put(
                dict(
                    seconds=seconds,
                    compute=steps * STEP_S,
                    loop_cpu=cpu,
                    loop_wait=wait,
                    blocked=blocked,
                    worker_wait=producers_wait / WORKERS,
                    lost=lost + loop_wait_outside,
                    timeline=timeline + woke_wait,
                )
            )


def count(path: Path, n_samples: int, ranks: int, epochs: int) -> dict:
    """One count: `ranks` rank processes, their epochs' figures, the cores other programs used over them."""
    order = np.random.default_rng(0).permutation(n_samples)
    shards = np.array_split(order, ranks)
    out: mp.Queue = mp.get_context("fork").Queue()
    own_before = os.times()
    jiffies_before, wall_before = busy_jiffies(), time.monotonic()
    procs = [mp.get_context("fork").Process(target=rank_epochs, args=(path, s, epochs, out)) for s in shards]
    for p in procs:
        p.start()
    figures = [out.get(timeout=600) for _ in range(ranks * epochs)]
    for p in procs:
        p.join(timeout=60)
    own_after = os.times()
    wall = time.monotonic() - wall_before
    total = (busy_jiffies() - jiffies_before) / os.sysconf("SC_CLK_TCK")
    own = (own_after.children_user + own_after.children_system) - (
        own_before.children_user + own_before.children_system
    )
    others = max(0.0, total - own)  # children reaped by now: the ranks and their workers
    share = others / (others + own) if others + own > 0 else 0.0
    au = min(f["compute"] / f["seconds"] for f in figures)

    def credited(f: dict, given: float, scale: float = share) -> float:
        return f["compute"] / max(f["compute"], f["seconds"] - scale * given)

    rule = min(credited(f, f["loop_wait"] + min(f["worker_wait"], f["blocked"])) for f in figures)
    per_batch = min(credited(f, f["lost"]) for f in figures)
    timeline = min(credited(f, f["timeline"]) for f in figures)
    whole = min(credited(f, f["timeline"], 1.0) for f in figures)  # every wait given back, not others' share
    return dict(
        au=au, rule=rule, per_batch=per_batch, timeline=timeline, whole=whole, others_cores=others / wall, share=share
    )


@contextlib.contextmanager
def busy(loops: int):
    procs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(loops)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", default="1,4")
    p.add_argument("--busy", default="1,2", help="busy loops beside, each in its own alternating trial")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--dir", type=Path, default=None)
    args = p.parse_args()
    work = work_dir(args.dir, "feed-critical-")
    try:
        path = work / "samples.u8"
        with open(path, "wb") as f:
            for _ in range(args.samples // 256):
                f.write(os.urandom(256 * SAMPLE))
        np.fromfile(path, dtype=np.uint8).sum()  # warm
        print(f"{os.uname().nodename}: {args.samples} samples of {SAMPLE} B, batch {BATCH}, step {STEP_S * 1e3:g} ms")
        print("trial busy ranks | quiet AU | busy AU  rule's credit  per batch  timeline  whole | others' cores share")
        for trial in range(args.trials):
            for loops in [int(x) for x in args.busy.split(",")]:
                for n in [int(x) for x in args.ranks.split(",")]:
                    quiet = count(path, args.samples, n, args.epochs)
                    with busy(loops):
                        time.sleep(1)
                        beside = count(path, args.samples, n, args.epochs)
                    print(
                        f"{trial + 1:5} {loops:4} {n:5} | {quiet['au']:8.3f} | {beside['au']:7.3f} "
                        f"{beside['rule']:14.3f} {beside['per_batch']:10.3f} {beside['timeline']:9.3f} "
                        f"{beside['whole']:6.3f} | "
                        f"{beside['others_cores']:13.2f} {beside['share']:.2f}   (quiet credited: rule "
                        f"{quiet['rule']:.3f}, timeline {quiet['timeline']:.3f}, whole {quiet['whole']:.3f}, others "
                        f"{quiet['others_cores']:.2f})",
                        flush=True,
                    )
    finally:
        remove_work(work)


if __name__ == "__main__":
    sys.exit(main())
