"""`iobench checkpoint`, whole and below the command line: the request checked (libraries, sizes against memory, the
device, the folder, the results file) before anything is made; each size's rounds, each library's saves in every save
mode and its restores warm and cold, each in a fresh process at the same torch threads, its record appended as it is
made; the kill test; the summary and the answer. It prints nothing: the command line draws its events and prints
the outcome."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from iobench.checkpoint.libraries import Library, libraries_help
from iobench.checkpoint.plan import Step, TimeLeft, estimate_of, planned
from iobench.checkpoint.request import CheckpointRequest, checked, checkpoint_request, for_tune
from iobench.checkpoint.state import StateSpec
from iobench.errors import IobenchError
from iobench.events import Events
from iobench.judge.checkpoints import checkpoint_answer, checkpoint_choice, kills_said
from iobench.judge.paste import paste_verdict
from iobench.results.checkpoint_record import CheckpointKills, CheckpointTrial
from iobench.results.checkpoint_summary import LibraryRow, kill_counts, rows_of
from iobench.run.paste_check import PasteCheck
from iobench.storage.checkpoints import CheckpointTarget
from iobench.system.private import children_temp

STORE_BUCKET = "iobench-checkpoints"
TUNED = "tuned"  # --tune's code: <results stem>-tuned.py
RESTORED = re.compile(r"restored exactly in ([0-9.]+) s")  # the pasted code's restore, from its line
__all__ = [
    "CheckpointOutcome",
    "TunedCheckpoint",
    "CheckpointRequest",
    "checkpoint_session",
    "libraries_help",
    "checkpoint_request",
]


@dataclass
class CheckpointOutcome:
    trials: list[CheckpointTrial] = field(default_factory=list)
    kills: list[CheckpointKills] = field(default_factory=list)
    rows: dict[StateSpec, list[LibraryRow]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    caches: tuple[str, ...] = ()  # the restores measured (cold alone on object storage)
    answer: str | None = None
    rules: str | None = None  # whether the answer would stand as a CLOSED MLPerf Storage result, and why not
    tuned: TunedCheckpoint | None = None  # --tune's code and its check


@dataclass(frozen=True)
class TunedCheckpoint:
    """--tune's pick as code: the row it rests on, the script (written beside the results), tune's figure (the steady
    durable save, seconds) and the script's own in a fresh process; `why` where there is no code."""

    row: LibraryRow | None
    script: Path | None = None
    text: str = ""
    seconds: float = 0.0
    check: PasteCheck | None = None
    why: str = ""
    restore_seconds: float | None = None  # tune's warm restore (None: tune measured none warm)

    @property
    def speed_ratio(self) -> float | None:
        """The script's save speed over tune's (tune's seconds over the script's)."""
        figure = self.check.figure if self.check is not None else None
        return self.seconds / figure if figure else None

    @property
    def verdict(self) -> str | None:
        return None if self.speed_ratio is None else paste_verdict(self.speed_ratio)

    @property
    def script_restore(self) -> float | None:
        """The script's own restore (warm, into a state already in memory), read from its line."""
        found = RESTORED.search(self.check.said) if self.check is not None and self.check.figure else None
        return float(found.group(1)) if found else None

    @property
    def restore_ratio(self) -> float | None:
        """The script's restore speed over tune's warm restore (tune's seconds over the script's)."""
        mine = self.script_restore
        return self.restore_seconds / mine if mine and self.restore_seconds else None

    @property
    def restore_verdict(self) -> str | None:
        return None if self.restore_ratio is None else paste_verdict(self.restore_ratio)


def checkpoint_session(request: CheckpointRequest, events: Events) -> CheckpointOutcome:
    """Every trial and kill the request asks for, its records in `request.results`; the rows and the answer."""
    from iobench.checkpoint.run_trials import kill_libraries, run_kills, run_trials

    left_out: list[str] = []
    if request.tune:
        request, left_out = for_tune(request)
    request, libraries, skipped = checked(request)
    if request.tune:
        from iobench.results.store import pasted_code_path

        pasted_code_path(request.results, TUNED)  # where its code goes, checked before anything is measured
    for line in [*left_out, *skipped]:
        events.say(line)
    kills = kill_libraries(request, libraries)
    session = secrets.token_hex(6)  # the trials' turns: their order each round, and how their records are paired
    if request.tune:
        request, steps, estimate = _within_budget(request, libraries, kills, events, session)
    else:
        steps = planned(request, libraries, session)
        estimate = estimate_of(steps, request, kills)
    remote = f"object storage ({request.remote.name})" if request.remote else None
    where = request.endpoint_url or remote or str(request.directory)
    events.say(
        f"checkpoint: {', '.join(_sizes(request.specs))}; {', '.join(lib.name for lib in libraries)}; "
        f"{request.rounds} round(s), {'/'.join(request.save_modes)} saves, {request.torch_threads} torch "
        f"threads, under {where}; about {estimate.total_words()}: {estimate.parts_words()}"
    )
    if any(lib.group for lib in libraries):
        from iobench.system.ranks import TCP_STORE_EXPOSURE

        events.say(f"note: {TCP_STORE_EXPOSURE}")
    outcome = CheckpointOutcome(skipped=skipped, caches=request.caches)
    with events.trials(len(steps) + len(kills) * request.kill_test) as progress, children_temp("trials"):
        with target_of(request) as target:
            outcome.trials = run_trials(request, steps, target, progress, estimate, session)
        if kills:
            outcome.kills = run_kills(request, kills, progress, estimate)
    counts = kill_counts(outcome.kills)
    for spec in request.specs:
        rows = rows_of([t for t in outcome.trials if t.params == spec.params and t.layout == spec.layout])
        outcome.rows[spec] = rows
    largest = max(request.specs, key=lambda s: s.state_bytes)
    outcome.answer = checkpoint_answer(outcome.rows[largest], counts)
    if outcome.answer:
        from iobench.judge.rules import checkpoint_rules_line

        outcome.rules = checkpoint_rules_line(outcome.rows[largest])
    if request.tune:
        outcome.tuned = _tuned(request, largest, outcome.rows[largest], counts, events)
    return outcome


def _within_budget(
    request: CheckpointRequest,
    libraries: list[Library],
    kills: list[tuple[str, str]],
    events: Events,
    session: str = "",
) -> tuple[CheckpointRequest, list[Step], TimeLeft]:
    """--tune's rounds cut until the estimate fits --budget-minutes; a refusal in one line where one round cannot."""
    budget = request.budget_minutes * 60
    for rounds in range(request.rounds, 0, -1):
        fitted = replace(request, rounds=rounds)
        steps = planned(fitted, libraries, session)
        estimate = estimate_of(steps, fitted, kills)
        if sum(estimate.ahead) <= budget:
            if rounds < request.rounds:
                events.say(f"tune: {rounds} round(s), not {request.rounds}, within --budget-minutes {budget / 60:g}")
            return fitted, steps, estimate
    raise IobenchError(
        f"checkpoint --tune: one round of {len(libraries)} libraries in {len(request.save_modes)} save modes takes "
        f"about {estimate.total_words()} ({estimate.parts_words()}), over --budget-minutes "
        f"{request.budget_minutes:g}: give more minutes, or fewer --libraries or --save-mode"
    )


def _existing(folder: Path) -> Path:
    """--dir, or its nearest folder that still exists (iobench made the rest, and removed them at the end): where
    the script makes its own folder."""
    folder = folder.resolve()
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder


def _tuned(
    request: CheckpointRequest,
    spec: StateSpec,
    rows: list[LibraryRow],
    kills: dict[tuple[str, str], dict[str, int]],
    events: Events,
) -> TunedCheckpoint:
    """The fastest kill-proof choice (the judgement's) as code beside the results, run once in a fresh process."""
    from iobench.checkpoint.paste import FIGURE_LINE, checkpoint_script
    from iobench.results.store import pasted_code_path
    from iobench.run.paste_check import check_paste
    from iobench.system.fsutil import atomic_write_text

    choice = checkpoint_choice(rows, kills)
    best = choice.best
    if best is None or best.durable_s is None:
        return TunedCheckpoint(None, why="no library and mode restored exactly without a kill losing a checkpoint")
    figure = (
        f"Measured by `iobench checkpoint --tune` on a {spec.state_bytes / 1e9:.2f} GB state: durable in "
        f"{best.durable_s:.3f} s (the steady save, median of {len(best.durable_rounds)} round(s)), restored "
        f"{best.restore_word} in {best.restore_s:.3f} s; "
        + kills_said(best, kills)
        + ("" if choice.settled else "; other programs ran beside the trials: the ranking may not hold")
    )
    text = checkpoint_script(
        best.library,
        best.save_mode,
        spec,
        figure,
        best.durable_s,
        str(_existing(request.directory)),
        request.torch_threads or 1,
    )
    script = pasted_code_path(request.results, TUNED)
    atomic_write_text(script, text)
    events.say(f"checking the pasted code in a fresh process: {script}")
    timeout = 120 + 10 * best.durable_s * 8 + 5 * (best.restore_s or 0)
    check = check_paste(text, str(script), timeout, re.compile(re.escape(FIGURE_LINE) + r"([0-9.]+) s"))
    return TunedCheckpoint(best, script, text, best.durable_s, check, restore_seconds=best.warm_s)


def _sizes(specs: tuple[StateSpec, ...]) -> list[str]:
    return [f"a {s.state_bytes / 1e9:.2f} GB state ({s.params:,} parameters, {s.described})" for s in specs]


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
