"""`iobench run --dataset-factory`, whole: the user's Dataset or DataLoader called once and described, its epochs
timed as a run's are, the one record appended to the results file. Prints nothing: the command line prints it as
`run` prints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from iobench.events import Events
from iobench.results.record import RunRecord
from iobench.run.dataset_factory import FactoryRequest


@dataclass(frozen=True)
class FactoryRunRequest:
    """What is timed (`factory`: the pipeline and its settings), on which device, where its record goes, and the
    loader options typed (refused beside a factory that builds its own DataLoader)."""

    factory: FactoryRequest
    device: str
    results: Path
    loader_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class FactoryOutcome:
    record: RunRecord
    label: str  # the factory, as typed


def factory_session(request: FactoryRunRequest, events: Events) -> FactoryOutcome:
    """Plan (import and call the factory once), time its runs under the configuration's progress, save the record."""
    from dataclasses import replace

    from iobench.plan.resolve import device_of
    from iobench.results.store import check_writable
    from iobench.run.dataset_factory import plan, run_factory
    from iobench.run.saving import save
    from iobench.settings import pinning_for

    check_writable(request.results)
    device = device_of(request.device)
    wanted = request.factory
    settings = replace(wanted.settings, pin_memory=pinning_for(wanted.settings.pin_memory, device.type == "cuda"))
    planned = plan(replace(wanted, settings=settings), device, request.loader_flags)
    total = wanted.runs * (wanted.warmup + wanted.epochs)
    with events.configuration(wanted.factory, total) as progress:
        record = run_factory(planned, progress)
    save(request.results, record, events)
    return FactoryOutcome(record, wanted.factory)
