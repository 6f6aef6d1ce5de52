"""--what-if's checks: each configuration measured again at other step times (`--step sleep:MS`), so that the
report's prediction from its first run (`iobench.report.whatif`) is shown beside what happened."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from iobench.plan.resolve import ResolvedRun
from iobench.results.record import RunRecord


@dataclass(frozen=True)
class WhatIfCheck:
    record: RunRecord  # the run the prediction comes from
    step_ms: float
    measured: RunRecord  # the same configuration run with that step


def what_if_checks(
    todo: list[ResolvedRun],
    records: list[RunRecord],
    steps_ms: list[float],
    measure: Callable[[ResolvedRun], RunRecord],
) -> list[WhatIfCheck]:
    """Every configuration at every step time, measured by `measure` (the session's, which saves each record)."""
    checks = []
    for resolved, record in zip(todo, records, strict=True):
        for ms in steps_ms:
            check = replace(resolved, config=replace(resolved.config, step=f"sleep:{ms:g}"))
            checks.append(WhatIfCheck(record, ms, measure(check)))
    return checks
