"""`iobench checkpoint`, whole and below the command line: the request checked (libraries, sizes against memory, the
device, the folder, the results file) before anything is made; each size's rounds, each library's saves in every save
mode and its restores warm and cold, each in a fresh process at the same torch threads, its record appended as it is
made; the kill test; the summary and the answer. It prints nothing: the command line draws its events and prints
the outcome."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from iobench.checkpoint.libraries import libraries_help
from iobench.checkpoint.plan import estimate_of, planned
from iobench.checkpoint.request import CheckpointRequest, checked, request_of
from iobench.checkpoint.state import StateSpec
from iobench.events import Events
from iobench.judge.checkpoints import checkpoint_answer
from iobench.results.checkpoint_record import CheckpointKills, CheckpointTrial
from iobench.results.checkpoint_summary import LibraryRow, kill_counts, rows_of
from iobench.storage.checkpoints import CheckpointTarget

STORE_BUCKET = "iobench-checkpoints"
__all__ = [
    "CheckpointOutcome",
    "CheckpointRequest",
    "checkpoint_session",
    "libraries_help",
    "request_of",
]


@dataclass
class CheckpointOutcome:
    trials: list[CheckpointTrial] = field(default_factory=list)
    kills: list[CheckpointKills] = field(default_factory=list)
    rows: dict[StateSpec, list[LibraryRow]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    caches: tuple[str, ...] = ()  # the restores measured (cold alone on object storage)
    answer: str | None = None


def checkpoint_session(request: CheckpointRequest, events: Events) -> CheckpointOutcome:
    """Every trial and kill the request asks for, its records in `request.results`; the rows and the answer."""
    from iobench.checkpoint.run_trials import kill_libraries, run_kills, run_trials

    request, libraries, skipped = checked(request)
    for line in skipped:
        events.say(line)
    steps = planned(request, libraries)
    kills = kill_libraries(request, libraries)
    estimate = estimate_of(steps, request, kills)
    remote = f"object storage ({request.remote.name})" if request.remote else None
    where = request.endpoint_url or remote or str(request.directory)
    events.say(
        f"checkpoint: {', '.join(_sizes(request.specs))}; {', '.join(lib.name for lib in libraries)}; "
        f"{request.rounds} round(s), {'/'.join(request.save_modes)} saves, {request.torch_threads} torch "
        f"threads, under {where}; about {estimate.total_words()}"
    )
    outcome = CheckpointOutcome(skipped=skipped, caches=request.caches)
    with events.trials(len(steps) + len(kills) * request.kill_test) as progress:
        with target_of(request) as target:
            outcome.trials = run_trials(request, steps, target, progress, estimate)
        if kills:
            outcome.kills = run_kills(request, kills, progress, estimate)
    counts = kill_counts(outcome.kills)
    for spec in request.specs:
        rows = rows_of([t for t in outcome.trials if t.params == spec.params and t.layout == spec.layout])
        outcome.rows[spec] = rows
    largest = max(request.specs, key=lambda s: s.state_bytes)
    outcome.answer = checkpoint_answer(outcome.rows[largest], counts)
    return outcome


def _sizes(specs: tuple[StateSpec, ...]) -> list[str]:
    return [f"a {s.state_bytes / 2**30:.2f} GiB state ({s.params:,} parameters, {s.described})" for s in specs]


@contextmanager
def target_of(request: CheckpointRequest) -> Iterator[CheckpointTarget]:
    """Where the trials write: iobench's writable store on loopback (--remote), the store at --endpoint-url, or a
    folder of iobench's own under --dir."""
    from iobench.storage.checkpoints import local_target, object_target

    if request.remote is not None:
        from iobench.storage.remote.writable_store import WritableStore

        store = WritableStore(request.remote, STORE_BUCKET)
        with (
            store as endpoint,
            object_target(endpoint, f"iobench's store ({request.remote.name})", store.access_log) as target,
        ):
            yield target
    elif request.endpoint_url is not None:
        from urllib.parse import urlsplit

        from iobench.storage.remote.endpoint import store_at

        endpoint = store_at(request.endpoint_url)
        with object_target(endpoint, urlsplit(endpoint.url).netloc) as target:
            yield target
    else:
        with local_target(request.directory) as target:
            yield target
