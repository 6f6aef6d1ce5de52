"""Before the runs of one `iobench run`: finding (or preparing) the dataset, resolving every configuration before
any is measured, and launching the ranks (`--nproc`)."""

from __future__ import annotations

from pathlib import Path

from iobench.data.manifest import MANIFEST, dataset_dirs, find_run_dataset
from iobench.data.prepare import WriteRequest, prepare
from iobench.errors import IobenchError
from iobench.events import Events
from iobench.formats import FORMATS
from iobench.plan.config import RunConfig
from iobench.plan.place import RunPlace
from iobench.plan.resolve import ResolvedRun, RunTarget, check_dataset, check_world, resolve
from iobench.run.launch import launch, shown
from iobench.spec import DatasetSpec
from iobench.system.world import SINGLE, World, launched_by_torchrun, rank_device
from iobench.units import DEFAULT_SIZE, QUICK_SIZE

DEFAULT_DATA_DIR = Path("data")


def dataset_for_run(
    world: World,
    data_dir: Path,
    dataset: str | None,
    formats: tuple[str, ...],
    events: Events,
    size: int | None = None,
) -> Path:
    """The dataset to measure (with `size`: the one of that many samples); when there is none, it is
    prepared (by rank 0 under torchrun) after saying what will be written, with the formats the run needs."""
    if not data_dir.exists() and data_dir != DEFAULT_DATA_DIR:
        # Most likely a typo: do not write half a gigabyte into a new folder of that name.
        raise IobenchError(f"{data_dir}: no such folder; check --data-dir, or create it with `iobench prepare`")
    if data_dir.exists() and not data_dir.is_dir():  # said before "preparing it first", not after it
        raise IobenchError(f"--data-dir {data_dir} is not a folder")
    if size is not None and dataset is None:
        dataset = DatasetSpec(size).name
        if not (data_dir / dataset / MANIFEST).is_file():
            return _prepared(world, data_dir, DatasetSpec(size), formats, events, dataset)
    skipped: list[str] = []
    found = find_run_dataset(data_dir, dataset, formats, skipped)
    if world.is_main:
        for reason in skipped:
            events.say(f"warning: skipped {reason}")
    if world.all_true(found is not None):
        if dataset is None and world.is_main and (n := len(dataset_dirs(data_dir))) > 1:  # a choice: say which
            events.say(
                f"dataset: {found.name}, the most recently prepared of {n} in {data_dir} (--dataset picks another)"
            )
        return found
    return _prepared(world, data_dir, DatasetSpec(DEFAULT_SIZE), formats, events, dataset)


def _prepared(
    world: World,
    data_dir: Path,
    spec: DatasetSpec,
    formats: tuple[str, ...],
    events: Events,
    dataset: str | None,
) -> Path:
    if world.nodes > 1:
        raise IobenchError(f"no dataset in {data_dir} on every node; run `iobench prepare` on each node first")
    if world.is_main:
        request = WriteRequest.with_default_options(spec, data_dir, formats)
        disk = sum(FORMATS[n].estimate_bytes(spec, request.options[n]) for n in formats)
        quick = f"{QUICK_SIZE:.0e}".replace("e+0", "e").replace("e+", "e")
        smaller = "" if spec.n_samples <= QUICK_SIZE else f"; `--size {quick}` makes a smaller one"
        events.say(
            f"no dataset {spec.name} in {data_dir}: preparing it first ({spec.n_samples:,} samples, "
            f"up to about {disk / 1e6:,.0f} MB on disk for {', '.join(formats)}){smaller}"
        )
        with events.progress() as reporter:
            prepare(request, reporter)
    world.barrier()
    return find_run_dataset(data_dir, dataset or spec.name, formats)


def resolve_all(configs: list[RunConfig], target: RunTarget, world: World = SINGLE) -> list[ResolvedRun]:
    """Every configuration checked against the machine, the dataset and the ranks before any runs."""
    return [resolve(c, target, world) for c in configs]


def batch_notes(configs: list[RunConfig], todo: list[ResolvedRun]) -> list[str]:
    """One line for the batch sizes fitted to a dataset smaller than them (`fitted_batch`), whatever the count of
    configurations."""
    fitted = {
        (c.settings.batch_size, r.config.settings.batch_size)
        for c, r in zip(configs, todo, strict=True)
        if c.settings.batch_size != r.config.settings.batch_size
    }
    if not fitted:
        return []
    n = todo[0].manifest.spec.n_samples
    said = ", ".join(f"{asked:,} -> {got:,}" for asked, got in sorted(fitted))
    return [
        f"batch size {said}: the dataset holds {n:,} samples, and a batch larger than an epoch's share makes every "
        "epoch one batch (a larger --size measures a loader's steady state)"
    ]


def launch_torchrun(
    nproc: int,
    argv: list[str],
    where: RunPlace,
    configs: list[RunConfig],
    events: Events,
) -> None:
    """`--nproc N`: check and prepare here, then run the same arguments as N ranks on this machine."""
    if launched_by_torchrun():
        raise IobenchError("--nproc launches ranks; under torchrun leave it out")
    if nproc < 1:
        raise IobenchError(f"--nproc must be >= 1, got {nproc}")
    local = World(size=nproc, local_size=nproc)
    for rank in range(nproc):
        rank_device(where.device, rank)
    formats = tuple(dict.fromkeys(c.format for c in configs))
    dataset_dir = dataset_for_run(SINGLE, where.data_dir, where.dataset, formats, events, where.size)
    # Each rank resolves against its own device; here the dataset and the shares.
    for c in configs:
        check_world(c, check_dataset(dataset_dir, c.format), local)
    events.say(f"launching: {shown(argv, nproc)}")
    launch(argv, nproc)
