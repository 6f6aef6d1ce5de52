"""torchrun: which rank this process is, its device, the process group and the collectives we need.

Every run goes through a World; outside torchrun it is a world of one whose barrier and gather do
nothing, so the runner has one code path.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from iobench.errors import IobenchError, RunFailed
from iobench.system.devices import device_here
from iobench.torchrun_env import TORCHRUN_VARIABLES, launched_by_torchrun  # noqa: F401 - re-exported

HOSTNAME_BYTES = 64
TIMEOUT = dt.timedelta(minutes=30)  # rank 0 may prepare a dataset or measure limits while others wait


class RankLost(RunFailed):
    """A collective failed: another rank ended (its own line says why) or did not arrive within the wait."""


@contextmanager
def _collective(timeout: dt.timedelta) -> Iterator[None]:
    """A collective's failure as one line of this rank's (the command line names the rank): gloo's "Connection closed
    by peer" printed rank 0's whole traceback (60 lines) beside the failing rank's own line."""
    try:
        yield
    except RuntimeError as exc:  # torch's DistBackendError is one
        text = str(exc).lower()
        if "timed out" in text or "timeout" in text:
            raise RankLost(
                f"the other ranks did not arrive within {timeout.total_seconds():g} s (one hung, in its "
                "step or its reads?); --rank-timeout sets the wait"
            ) from None
        raise RankLost("another rank ended mid-run (its own line says why)") from None


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1
    node_rank: int = 0
    backend: str | None = None  # None: not launched by torchrun, no process group
    device: torch.device | None = None  # where collective tensors live (CUDA for nccl)
    timeout: dt.timedelta = TIMEOUT  # how long a collective waits for the other ranks

    @property
    def active(self) -> bool:
        return self.backend is not None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_node_main(self) -> bool:
        """One process per node does what is per node: evicting the page cache, counting disk reads."""
        return self.local_rank == 0

    @property
    def nodes(self) -> int:
        return max(1, self.size // max(1, self.local_size))

    def barrier(self) -> None:
        if not self.active:
            return
        with _collective(self.timeout):
            if self.backend == "nccl":
                dist.barrier(device_ids=[self.device.index])
            else:
                dist.barrier()

    def gather(self, values: list[float]) -> list[list[float]]:
        """Every rank's row of numbers, in rank order, on every rank (rows must be the same length)."""
        if not self.active:
            return [list(values)]
        mine = torch.tensor(values, dtype=torch.float64, device=self.device)
        rows = [torch.empty_like(mine) for _ in range(self.size)]
        with _collective(self.timeout):
            dist.all_gather(rows, mine)
        return [row.cpu().tolist() for row in rows]

    def hostnames(self) -> list[str]:
        """Each rank's host name, in rank order (bytes through a tensor: no pickled objects)."""
        name = platform.node().encode()[:HOSTNAME_BYTES].ljust(HOSTNAME_BYTES, b"\0")
        if not self.active:
            return [name.rstrip(b"\0").decode(errors="replace")]
        mine = torch.tensor(list(name), dtype=torch.uint8, device=self.device)
        rows = [torch.empty_like(mine) for _ in range(self.size)]
        with _collective(self.timeout):
            dist.all_gather(rows, mine)
        return [bytes(row.cpu().tolist()).rstrip(b"\0").decode(errors="replace") for row in rows]

    def index_counts(self, indices: Any, n: int) -> Any:
        """How many times each of `n` samples reached any rank: every rank's delivered indices counted, summed
        across ranks (an int32 tensor of `n`, reduced without pickle)."""
        import numpy as np

        mine = torch.from_numpy(np.bincount(np.asarray(indices, dtype=np.int64), minlength=n)[:n].astype(np.int32))
        if self.active:
            mine = mine.to(self.device) if self.device is not None else mine
            with _collective(self.timeout):
                dist.all_reduce(mine)
        return mine.cpu().numpy()

    def all_true(self, flag: bool) -> bool:
        """Whether flag holds on every rank."""
        return all(row[0] > 0 for row in self.gather([1.0 if flag else 0.0]))


SINGLE = World()


def rank_device(text: str, local_rank: int) -> str:
    """Under torchrun each rank takes cuda:LOCAL_RANK (or the CPU); naming one GPU would put every rank on it."""
    return str(device_here(text, local_rank))


def join_group(backend: str, rank: int, timeout: dt.timedelta = TIMEOUT, env: Mapping[str, str] = os.environ) -> None:
    """Join the process group from the variables torchrun or `iobench.system.ranks` set (every rank of a run, and of a
    checkpoint trial started as ranks, joins here): iobench's own ranks through the store file it names (a folder of
    this user's), torchrun's through its store; a failure in one line."""
    from iobench.system.ranks import STORE_FILE

    try:
        if STORE_FILE in env:
            size = int(env["WORLD_SIZE"])
            store = dist.FileStore(env[STORE_FILE], size)
            dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=timeout)
        else:
            dist.init_process_group(backend, timeout=timeout)
    except (RuntimeError, ValueError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise IobenchError(f"rank {rank}: joining the {backend} process group failed: {text}") from None


@contextmanager
def joined(
    device_text: str, env: Mapping[str, str] = os.environ, timeout_s: float | None = None
) -> Iterator[tuple[World, str]]:
    """This process's World and device while inside; the process group is torn down on the way out.

    Outside torchrun: the world of one and the device as given. Under torchrun: gloo for CPU ranks,
    nccl for CUDA ranks, rendezvous from the variables torchrun sets.
    """
    if not launched_by_torchrun(env):
        yield SINGLE, device_text
        return
    rank, size, local_rank = (int(env[name]) for name in TORCHRUN_VARIABLES)
    device = rank_device(device_text, local_rank)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(local_rank)
    backend = "nccl" if cuda else "gloo"
    timeout = TIMEOUT if timeout_s is None else dt.timedelta(seconds=timeout_s)
    join_group(backend, rank, timeout, env)
    world = World(
        rank=rank,
        size=size,
        local_rank=local_rank,
        local_size=int(env.get("LOCAL_WORLD_SIZE", size)),
        node_rank=int(env.get("GROUP_RANK", 0)),
        backend=backend,
        device=torch.device(device) if cuda else torch.device("cpu"),
        timeout=timeout,
    )
    try:
        yield world, device
    finally:
        dist.destroy_process_group()
