"""`checkpoint --workload`: one of MLPerf Storage's checkpointing workloads (llama3-8b ... -1t) written and read on
this machine as DLIO writes it: the first `--nproc` ranks of the model's layout (MLPerf's subset mode), `--scale` of
its layers, `--rounds` checkpoints written (each fsynced) and then read cold. A Request in, an Outcome back: the record,
the answer and the rules line (`iobench.judge.workload`). The ranks run in a folder of iobench's own under --dir,
removed on every exit path; the disk and the memory they need are checked before anything is allocated."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path

from iobench.checkpoint.llama3 import CHECKPOINTS, WORKLOADS, checkpoint_bytes, rank_files, scaled
from iobench.checkpoint.llama3_rank import MAX_CHECKPOINTS, PROGRESS, WorkloadJob
from iobench.errors import IobenchError
from iobench.events import Events
from iobench.judge.workload import answer, ranks_text, workload_rules_line
from iobench.results.record_base import HostLoad
from iobench.results.record_parts import Environment
from iobench.results.workload_record import WORKLOAD, WorkloadRecord
from iobench.system.contention import other_cores_busy

RANK_MODULE = "iobench.checkpoint.llama3_rank"
DISK_MARGIN_BYTES = 256 * 2**20
MIN_DISK_GB_PER_S = 0.05  # the slowest disk the time limit allows for (a throttled one)


@dataclass(frozen=True)
class WorkloadRequest:
    workload: str
    scale: float  # the share of the transformer layers written
    ranks: int  # the first ranks of the layout
    checkpoints: int  # written, then read
    directory: Path
    results: Path


@dataclass(frozen=True)
class WorkloadOutcome:
    record: WorkloadRecord
    answer: str
    rules: str


def workload_request(
    *, workload: str, scale: float, ranks: int | None, checkpoints: int | None, directory: Path, results: Path
) -> WorkloadRequest:
    """The request, each value checked where it is parsed (one line naming the option)."""
    name = workload.strip().lower()
    if name not in WORKLOADS:
        near = get_close_matches(name, WORKLOADS, n=1)
        hint = f", did you mean {near[0]}?" if near else ""
        raise IobenchError(f"--workload {workload}: not one of {', '.join(WORKLOADS)}{hint}")
    if not 0 < scale <= 1:
        raise IobenchError(f"--scale must be above 0 and at most 1 (a share of the layers), got {scale:g}")
    most = WORKLOADS[name].ranks
    ranks = 1 if ranks is None else ranks
    if not 1 <= ranks <= most:
        raise IobenchError(f"--nproc: {name} has {most} ranks; give 1 to {most}, got {ranks}")
    count = CHECKPOINTS if checkpoints is None else checkpoints
    if not 1 <= count <= MAX_CHECKPOINTS:
        raise IobenchError(f"--rounds: 1 to {MAX_CHECKPOINTS} checkpoints written and read, got {count}")
    return WorkloadRequest(name, scale, ranks, count, directory, results)


def workload_session(request: WorkloadRequest, events: Events) -> WorkloadOutcome:
    """The layout sized and checked against the disk and the memory, written and read by its ranks, recorded."""
    from iobench.results.store import append_record, first_kind
    from iobench.storage.checkpoints import work_folder

    if request.results.exists() and request.results.stat().st_size and first_kind(request.results) != WORKLOAD:
        raise IobenchError(f"--results {request.results} holds other records: give a file of its own")
    whole = WORKLOADS[request.workload]
    kept = scaled(whole, request.scale)
    per_rank = [sum(f.nbytes for f in rank_files(kept, r)) for r in range(request.ranks)]
    _check_room(request, kept.layers, per_rank)
    one = sum(per_rank)
    on_disk = one * request.checkpoints / 1e9
    events.say(
        f"{request.workload}: {ranks_text(request.ranks)} of {whole.ranks}, {kept.layers} of {whole.layers} layers: "
        f"{one / 1e9:,.2f} GB a checkpoint, {request.checkpoints} written then read ({on_disk:,.1f} GB on the disk)"
    )
    before = (os.getloadavg()[0], other_cores_busy())
    with work_folder(request.directory) as folder:
        job = WorkloadJob(request.workload, kept.layers, str(folder), request.checkpoints, request.checkpoints)
        figures = _ranks(job, request.ranks, one, events)
        env = _environment(folder)
    after = (os.getloadavg()[0], other_cores_busy())
    record = WorkloadRecord(
        workload=request.workload,
        layers=kept.layers,
        layers_whole=whole.layers,
        layout_ranks=whole.ranks,
        whole_bytes=checkpoint_bytes(whole),
        cold="fadvise",
        source=whole.source,
        write_s=figures["write_s"],
        read_s=figures["read_s"],
        rank_bytes=figures["bytes"],
        environment=Environment(**env),
        host=HostLoad(load_before=before[0], load_after=after[0], other_cpu_before=before[1], other_cpu_after=after[1]),
        timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )
    WorkloadRecord.from_json(record.to_json())  # what the ranks said is checked as a stored record is
    append_record(request.results, record)  # type: ignore[arg-type]
    return WorkloadOutcome(record, answer(record), workload_rules_line(record))


def _check_room(request: WorkloadRequest, layers: int, per_rank: list[int]) -> None:
    """Refuse in one line what the disk or the memory cannot hold, with the --scale that would fit."""
    from iobench.system.fsutil import free_bytes
    from iobench.system.memory import memory_room
    from iobench.system.ranks import RANK_FIXED_BYTES

    one = sum(per_rank)
    disk = one * request.checkpoints + DISK_MARGIN_BYTES
    free = free_bytes(request.directory)
    room = memory_room()
    memory = one + request.ranks * RANK_FIXED_BYTES
    if disk > free:
        raise IobenchError(
            f"--workload {request.workload}: {request.checkpoints} checkpoints of {one / 1e9:,.2f} GB need "
            f"{disk / 1e9:,.1f} GB under --dir {request.directory}, {free / 1e9:,.1f} GB free: a smaller --scale "
            f"(it keeps {layers} layers), fewer --rounds or --nproc"
        )
    if memory > room.available:
        raise IobenchError(
            f"--workload {request.workload}: {request.ranks} rank(s) hold {one / 1e9:,.2f} GB of state and "
            f"{request.ranks * RANK_FIXED_BYTES / 1e9:.1f} GB of their own, {room.available / 1e9:,.1f} GB "
            f"{room.says()}: a smaller --scale or fewer --nproc"
        )


class Progress:
    """Rank 0's line after each checkpoint, said once as it comes: which checkpoint, its seconds and GB/s."""

    def __init__(self, checkpoint_bytes: int, events: Events) -> None:
        self.bytes, self.events, self.seen = checkpoint_bytes, events, 0

    def new_lines(self, output: str) -> None:
        finished = output.split("\n")[:-1]  # the last: a line still being written, or nothing
        for line in finished[self.seen :]:
            self.seen += 1
            try:
                said = json.loads(line)
            except ValueError:
                continue
            if isinstance(said, dict) and PROGRESS in said and isinstance(said.get("seconds"), float):
                rate = self.bytes / said["seconds"] / 1e9 if said["seconds"] > 0 else 0.0
                self.events.say(
                    f"  checkpoint {said.get('k')} of {said.get('of')} {said[PROGRESS]} in {said['seconds']:.2f} s "
                    f"({rate:,.2f} GB/s, rank 0's clock)"
                )


def _ranks(job: WorkloadJob, ranks: int, one: int, events: Events) -> dict:
    """The ranks run to their end; rank 0's line, checked; a failure in one line."""
    from iobench.checkpoint.processes import last_result
    from iobench.system.processes import python_module
    from iobench.system.ranks import Ranks, child_env

    timeout = 600 + 4 * one * job.writes / (MIN_DISK_GB_PER_S * 1e9)
    began = time.monotonic()
    with Ranks(python_module(RANK_MODULE, json.dumps(job.to_json())), ranks, env=child_env(), capture=True) as r:
        said = Progress(one, events)
        try:
            exits = r.wait(timeout, tick=lambda: said.new_lines(r.output_so_far(0)))
        except TimeoutError as exc:
            raise IobenchError(f"checkpoint --workload: {exc}") from None
    failed = next((e for e in exits if e.code != 0), None)
    if failed is not None:
        said = (failed.stderr.strip().splitlines() or [f"exit {failed.code}"])[-1]
        raise IobenchError(
            f"checkpoint --workload: rank {failed.rank} failed after {time.monotonic() - began:.0f} s: {said}"
        )
    figures = last_result(exits[0].stdout, "checkpoint --workload: rank 0")
    if set(figures) != {"write_s", "read_s", "bytes"}:
        raise IobenchError("checkpoint --workload: rank 0 gave no figures")
    return figures


def _environment(folder: Path) -> dict:
    import torch

    from iobench.system.environment import environment

    return environment(folder, torch.device("cpu"))
