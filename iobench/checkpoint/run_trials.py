"""The session's steps carried out: each save or restore in a fresh process on the target, the machine's load read
before and after it (not after the trial alone), a cold restore's checkpoint evicted and a warm one's required
resident, the requests that moved it counted, its record appended as it is made; then the kill tests, each library
and save mode in a folder of its own under --dir."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

from iobench.checkpoint import save_modes
from iobench.checkpoint.job import CheckpointJob
from iobench.checkpoint.kill_test import kill_test
from iobench.checkpoint.libraries import LIBRARIES, Library
from iobench.checkpoint.plan import Step, TimeLeft
from iobench.checkpoint.processes import trial
from iobench.checkpoint.request import CheckpointRequest, environment_of
from iobench.errors import IobenchError
from iobench.events import Events
from iobench.results.checkpoint_record import CheckpointKills, CheckpointTrial
from iobench.results.record_base import HostLoad, Waits
from iobench.results.record_parts import Environment
from iobench.results.store import append_line
from iobench.storage.checkpoints import CheckpointPlace, CheckpointTarget, local_target
from iobench.system.contention import RECENT_SECONDS, other_cores_busy
from iobench.system.waits import WaitMeter

WARM_ENOUGH = 0.95  # a warm restore's checkpoint at least this resident in the page cache
MEASURED_KEYS = (
    "seconds",
    "done_seconds",
    "durable_seconds",
    "first_seconds",
    "first_durable_seconds",
    "removed_seconds",
    "blocked_seconds",
    "background_seconds",
    "step_rate",
    "step_rate_during",
    "started_seconds",
    "allocated_seconds",
    "restored_seconds",
    "stepped_seconds",
    "peak_rss_bytes",
    "anon_bytes",
    "file_bytes",
    "read_bytes",
    "exact",
    "differences",
    "ranks",
    "onto_device",
)


def run_trials(
    request: CheckpointRequest,
    steps: list[Step],
    target: CheckpointTarget,
    events: Events,
    estimate: TimeLeft,
    session: str = "",
) -> list[CheckpointTrial]:
    """Every step on `target`; a library's place of a round made at its first step and removed after its last. Each
    trial's record holds what its processes waited for and its library's place in the round (`session`'s turns)."""
    env = environment_of(request, [LIBRARIES[s.library] for s in steps])
    last = {(s.spec, s.round, s.library): k for k, s in enumerate(steps)}
    places: dict[tuple, CheckpointPlace] = {}
    records = []
    positions: dict[tuple, int] = {}
    for k, step in enumerate(steps):
        key = (step.spec, step.round, step.library)
        if key not in places:
            places[key] = target.place(f"{step.library}-{len(places)}")
        turn = (step.spec, step.round)
        position = positions.setdefault(key, sum(1 for p in positions if p[:2] == turn))
        started = time.monotonic()
        with WaitMeter() as meter:
            record = _trial(request, step, places[key], target, env)
        waits = Waits(turn_session=session, turn_positions=[position] if session else []).with_unit(meter.figures)
        record = replace(record, waits=waits)
        target.check()  # its folder removed under it (a shared --dir swept by another run): no record of it
        append_line(request.results, json.dumps(record.to_json()))
        records.append(record)
        events.trial_done(f"{step.label}: {_said(record)}", estimate.finished(time.monotonic() - started))
        if record.exact is False:
            events.say(f"{step.library}: the restored state differs: {'; '.join(record.differences)}")
        if last[key] == k:
            target.remove(places.pop(key))
    return records


def _trial(
    request: CheckpointRequest, step: Step, place: CheckpointPlace, target: CheckpointTarget, env: dict
) -> CheckpointTrial:
    lib = LIBRARIES[step.library]
    job = CheckpointJob(
        step.library,
        step.op,
        step.spec,
        place,
        step.save_mode,
        request.device,
        request.nproc if lib.ranks else 1,
        request.torch_threads or 1,
        saves=step.save_mode.saves,
        step=request.step if step.op == "save" else "none",
    )
    resident = None
    if step.op != "save":  # a restore, or a restart: the checkpoint made cold or warm first
        current = save_modes.current(target, place, step.save_mode)
        resident = _made_ready(target, current, step.cache == "cold")
    before = (os.getloadavg()[0], other_cores_busy(recent=RECENT_SECONDS))
    mark = target.requests_mark()
    disk = request.directory if target.kind == "local" else None
    if step.op == "restart":  # one process, from its start to its end: the whole the parts add up to
        job = job.with_(nproc=1, step=request.step, started=time.time())
        measured = trial(job, target.environment(), disk)
        ended = measured.pop("line_at", None) or time.time()  # its line, as its first step is done (alone)
        measured["seconds"] = ended - job.started
    else:
        measured = trial(job, target.environment(), disk)
    requests = target.requests_since(mark)
    after = (os.getloadavg()[0], other_cores_busy())
    size = target.size(save_modes.current(target, place, step.save_mode))
    host = HostLoad(load_before=before[0], other_cpu_before=before[1], load_after=after[0], other_cpu_after=after[1])
    environment = Environment(**{**env, "torch_threads": measured.get("torch_threads")})
    seconds, durable = measured["seconds"], measured.get("durable_seconds")
    return CheckpointTrial(
        library=lib.name,
        saver=lib.saves_as or "",
        ceiling=lib.ceiling,
        op=step.op,
        cache=step.cache,
        trial=step.round,
        params=step.spec.params,
        layout=step.spec.layout,
        device=request.device,
        nproc=job.nproc,
        state_bytes=step.spec.state_bytes,
        seed=step.spec.seed,
        source=Path(step.spec.source).name if step.spec.source else None,
        target=target.kind,
        store=target.where(),
        save_mode=step.save_mode,
        step=job.step,
        bytes_on_disk=size,
        gb_per_s=size / seconds / 1e9 if seconds > 0 else None,
        durable_gb_per_s=size / durable / 1e9 if durable else None,
        resident_before=resident,
        requests=requests.by_method if requests is not None else None,
        bytes_sent=requests.bytes_sent if requests is not None else None,
        bytes_received=requests.bytes_received if requests is not None else None,
        environment=environment,
        host=host,
        timestamp=_now(),
        **{k: measured[k] for k in MEASURED_KEYS if k in measured},
    )


def _made_ready(target: CheckpointTarget, place: CheckpointPlace, cold: bool) -> float | None:
    """Cold: the checkpoint evicted (and checked gone); warm: resident, read once more where the page cache let some
    of it go, and refused in one line where it cannot hold it."""
    if cold:
        return target.make_cold(place)
    resident = target.residency(place)
    if target.kind == "local" and resident is not None and resident < WARM_ENOUGH:
        for path in sorted(Path(place.folder).rglob("*")):
            if path.is_file() and not path.is_symlink():
                with open(path, "rb") as f:
                    while f.read(8 * 2**20):
                        pass
        resident = target.residency(place)
        if resident is not None and resident < WARM_ENOUGH:
            raise IobenchError(
                f"checkpoint: only {resident:.0%} of the checkpoint stays in the page cache after it "
                "is read: a warm restore needs the memory; give a smaller --params or --cache "
                "cold"
            )
    return resident


def _said(record: CheckpointTrial) -> str:
    if record.op == "save":
        return f"{record.bytes_on_disk / 1e9:.2f} GB durable in {record.timed_seconds:.2f} s"
    exact = "" if record.exact is not False else ", NOT exact"
    return f"{record.seconds:.2f} s{exact}"


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def kill_libraries(request: CheckpointRequest, libraries: list[Library]) -> list[tuple[str, str]]:
    """(library, save mode) of each kill test to run: the libraries with a save of their own, in every save mode."""
    if not request.kill_test:
        return []
    return [(lib.name, mode) for lib in libraries if lib.killed for mode in request.save_modes]


def run_kills(
    request: CheckpointRequest, kills: list[tuple[str, str]], events: Events, estimate: TimeLeft
) -> list[CheckpointKills]:
    """Each kill test in a local folder of its own under --dir (a kill of a save to object storage is not tested);
    its counts appended as a record."""
    spec = request.kill_spec or request.specs[0]
    env = environment_of(request, [LIBRARIES[name] for name, _ in kills])
    records = []
    with local_target(request.directory) as target:
        for name, mode in kills:
            job = CheckpointJob(
                name,
                "save",
                spec,
                target.place(f"kill-{name}-{mode.replace(':', '-')}"),
                mode,
                torch_threads=request.torch_threads or 1,
            )
            before = (os.getloadavg()[0], other_cores_busy(recent=RECENT_SECONDS))
            counts = kill_test(
                job, request.kill_test, {}, each=_KillSaid(events, estimate, f"{name} {mode}", request.kill_test)
            )
            after = (os.getloadavg()[0], other_cores_busy())
            target.check()
            record = CheckpointKills(
                library=name,
                save_mode=mode,
                params=spec.params,
                layout=spec.layout,
                state_bytes=spec.state_bytes,
                kills=sum(counts.values()),
                counts=counts,
                timestamp=_now(),
                environment=Environment(**{**env, "torch_threads": job.torch_threads}),
                host=HostLoad(
                    load_before=before[0], other_cpu_before=before[1], load_after=after[0], other_cpu_after=after[1]
                ),
            )
            append_line(request.results, json.dumps(record.to_json()))
            records.append(record)
    return records


class _KillSaid:
    """Each kill of one test told as it ends, with the time left."""

    def __init__(self, events: Events, estimate: TimeLeft, what: str, kills: int) -> None:
        self.events, self.estimate, self.what, self.kills = events, estimate, what, kills
        self.started = time.monotonic()

    def __call__(self, k: int, outcome: str) -> None:
        took, self.started = time.monotonic() - self.started, time.monotonic()
        self.events.trial_done(f"{self.what}: kill {k} of {self.kills}: {outcome}", self.estimate.finished(took))
