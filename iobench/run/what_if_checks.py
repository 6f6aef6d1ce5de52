"""--what-if's checks: each configuration measured again at other step times (`--step sleep:MS`), so that the
report's prediction from its first run (`iobench.report.whatif`) is shown beside what happened."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from iobench.events import Events
from iobench.plan.resolve import ResolvedRun
from iobench.results.ceilings import MachineLimits, RemoteLimits
from iobench.results.record import RunRecord
from iobench.run.saving import save
from iobench.run.session import run_one


@dataclass(frozen=True)
class WhatIfCheck:
    record: RunRecord  # the run the prediction comes from
    step_ms: float
    measured: RunRecord  # the same configuration run with that step


def what_if_checks(todo: list[ResolvedRun], records: list[RunRecord], steps_ms: list[float], results: Path,
                   limits: MachineLimits | RemoteLimits | None, events: Events) -> list[WhatIfCheck]:  # fmt: skip
    """Every configuration at every step time, measured (each measured record saved)."""
    checks = []
    for resolved, record in zip(todo, records, strict=True):
        for ms in steps_ms:
            check = replace(resolved, config=replace(resolved.config, step=f"sleep:{ms:g}"))
            measured = run_one(check, limits, None, events)
            save(results, measured, events)
            checks.append(WhatIfCheck(record, ms, measured))
    return checks
