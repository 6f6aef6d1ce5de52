"""Everything around the runs of one `iobench run`: finding (or preparing) the dataset, resolving
every configuration before any is measured, the machine's limits, and launching torchrun."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from iobench.data.manifest import find_run_dataset
from iobench.data.prepare import PrepareRequest, prepare
from iobench.errors import IobenchError
from iobench.progress import Reporter
from iobench.run.config import ResolvedRun, RunConfig, RunTarget, check_dataset, check_world, resolve
from iobench.run.distributed import SINGLE, World, launched_by_torchrun, rank_device
from iobench.run.launch import launch, torchrun_args
from iobench.spec import DatasetSpec
from iobench.units import DEFAULT_SIZE

Say = Callable[[str], None]
DEFAULT_DATA_DIR = Path("data")
Reporting = Callable[[], Reporter]  # a fresh progress reporter (a context manager) per long step


def dataset_for_run(
    world: World, data_dir: Path, dataset: str | None, formats: tuple[str, ...], say: Say, reporting: Reporting
) -> Path:
    """The dataset to measure; when there is none, the default one is prepared (by rank 0 under
    torchrun) after saying so, with the formats the run needs."""
    found = find_run_dataset(data_dir, dataset)
    if world.all_true(found is not None):
        return found
    if not data_dir.exists() and data_dir != DEFAULT_DATA_DIR:
        # Most likely a typo: do not write half a gigabyte into a new folder of that name.
        raise IobenchError(f"{data_dir}: no such folder; check --data-dir, or create it with `iobench prepare`")
    if world.nodes > 1:
        raise IobenchError(f"no dataset in {data_dir} on every node; run `iobench prepare` on each node first")
    if world.is_main:
        spec = DatasetSpec(DEFAULT_SIZE)
        say(
            f"no dataset in {data_dir}: preparing the default one ({spec.n_samples:,} samples, "
            f"{spec.payload_bytes / 1e6:,.0f} MB per format) first; `iobench prepare` makes others"
        )
        request = PrepareRequest.with_default_options(spec, data_dir, formats)
        with reporting() as reporter:
            prepare(request, reporter)
    world.barrier()
    return find_run_dataset(data_dir, dataset)


def resolve_all(configs: list[RunConfig], target: RunTarget, world: World = SINGLE) -> list[ResolvedRun]:
    """Every configuration checked against the machine, the dataset and the ranks before any runs."""
    return [resolve(c, target, world) for c in configs]


def launch_torchrun(
    nproc: int,
    argv: list[str],
    data_dir: Path,
    dataset: str | None,
    device_text: str,
    configs: list[RunConfig],
    say: Say,
    reporting: Reporting,
) -> None:
    """`--nproc N`: check and prepare here, then run the same arguments under torchrun --standalone."""
    if launched_by_torchrun():
        raise IobenchError("--nproc launches torchrun; under torchrun leave it out")
    if nproc < 1:
        raise IobenchError(f"--nproc must be >= 1, got {nproc}")
    local = World(size=nproc, local_size=nproc)
    for rank in range(nproc):
        rank_device(device_text, rank)
    formats = tuple(dict.fromkeys(c.format for c in configs))
    dataset_dir = dataset_for_run(SINGLE, data_dir, dataset, formats, say, reporting)
    # Each rank resolves against its own device; here the dataset and the shares.
    for c in configs:
        check_world(c, check_dataset(dataset_dir, c.format).spec.n_samples, local)
    args = torchrun_args(argv, nproc)
    say(f"launching: torchrun {' '.join(args)}")
    launch(args)
