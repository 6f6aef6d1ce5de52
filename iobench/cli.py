"""The `iobench` command line: parses, calls, prints. No logic a test would want to call."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from iobench import __version__
from iobench.data.dataset import DEFAULT_SIZE, DatasetSpec, parse_bytes, parse_shape, parse_size
from iobench.data.manifest import Manifest, find_datasets, find_run_dataset
from iobench.data.prepare import PrepareRequest, parse_formats, plan, prepare
from iobench.data.verify import verify_dataset
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.progress import NullReporter, RichReporter, make_reporter
from iobench.results.store import append_record
from iobench.results.tables import limits_table, profile_summary, results_table, run_warnings, split_table
from iobench.run.device import resolve_device
from iobench.run.distributed import SINGLE, World, joined, launched_by_torchrun, rank_device
from iobench.run.launch import launch, torchrun_args
from iobench.run.limits import measure_limits, save_limits, stored_or_measured
from iobench.run.loaders.base import LoaderSettings
from iobench.run.runner import LOADERS, RunConfig, check_config, check_dataset, check_world, parse_pairs, run
from iobench.run.steps import parse_step
from iobench.run.sweep import Point, config_identity, done, expand, settings_extras
from iobench.run.sweep_options import sweep_datasets, sweep_grid

app = typer.Typer(
    name="iobench",
    help="How fast does training data travel from disk to the device in PyTorch? "
    "Prepare one dataset in npy, HDF5, LMDB and TensorDict memmap, verify it, then time loading it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Not a terminal (a log, a pipe): wide enough for the tables rather than rich's 80 columns.
_WIDTH = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "180"))
out = Console(width=_WIDTH)
err = Console(stderr=True, width=None if sys.stderr.isatty() else int(os.environ.get("COLUMNS", "180")))

DataDir = Annotated[
    Path, typer.Option("--data-dir", help="Root folder of prepared datasets (or one dataset's folder).")
]
DatasetName = Annotated[
    Optional[str],  # noqa: UP045 - typer needs Optional on 3.9-style introspection
    typer.Option(
        "--dataset",
        help="Dataset folder name under --data-dir (default: derived from the spec; for run, the only one).",
    ),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


def _announce_limits() -> None:
    err.print("no stored limits for this machine and disk: measuring them once (`iobench limits`)", highlight=False)


def _reporter(quiet: bool) -> RichReporter | NullReporter:
    return make_reporter(quiet, err)


@app.command("prepare")
def prepare_cmd(
    size: Annotated[str, typer.Option(help="Number of samples: 1e7, 10000000, 10_000_000 or 10M.")] = str(DEFAULT_SIZE),
    formats: Annotated[str, typer.Option(help=f"Comma list of {', '.join(FORMATS)}, or all.")] = "all",
    data_dir: DataDir = Path("data"),
    dataset: DatasetName = None,
    shape: Annotated[str, typer.Option(help="Per-sample shape, e.g. 128 or 3,32,32.")] = "128",
    dtype: Annotated[
        str, typer.Option(help="Feature dtype: float32, float16, float64, uint8, int8..int64.")
    ] = "float32",
    classes: Annotated[int, typer.Option(help="Number of label classes.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the deterministic generator.")] = 0,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite formats (or a different dataset) already there.")
    ] = False,
    hdf5_chunk_rows: Annotated[int, typer.Option(help="HDF5 rows per chunk; 0 = about 64 KiB of features.")] = 0,
    hdf5_compression: Annotated[str, typer.Option(help="HDF5 compression: none, lzf or gzip.")] = "none",
    hdf5_gzip_level: Annotated[int, typer.Option(help="gzip level 0..9 when --hdf5-compression gzip.")] = 4,
    lmdb_samples_per_record: Annotated[int, typer.Option(help="Samples in one LMDB record.")] = 1,
    quiet: Quiet = False,
) -> None:
    """Generate the shared dataset and write it in each format (atomically: temp dir, fsync, rename)."""
    spec = DatasetSpec(parse_size(size), parse_shape(shape), dtype.lower(), classes, seed)
    names = parse_formats(formats)
    options = {name: FORMATS[name].options() for name in names}
    if "hdf5" in options:
        options["hdf5"] = FORMATS["hdf5"].options(
            chunk_rows=hdf5_chunk_rows, compression=hdf5_compression.lower(), compression_level=hdf5_gzip_level
        )
    if "lmdb" in options:
        options["lmdb"] = FORMATS["lmdb"].options(samples_per_record=lmdb_samples_per_record)
    request = PrepareRequest(spec, data_dir, names, options, dataset, force)
    checked = plan(request)
    if not quiet:
        err.print(
            f"preparing {request.dataset_dir}: {spec.n_samples:,} samples of {spec.shape} {spec.dtype}, "
            f"{spec.payload_bytes / 1e6:,.1f} MB per format, about {checked.estimated_bytes / 1e9:,.2f} GB in all",
            soft_wrap=True,
            highlight=False,
        )
    reporter = _reporter(quiet)
    with reporter:
        manifest = prepare(checked, reporter)
    for name in names:
        e = manifest.formats[name]
        out.print(f"{name:<7} {e.bytes / 1e6:>10,.1f} MB  {e.write_seconds:8.2f} s  {e.write_mb_per_s:8,.1f} MB/s")
    out.print(f"manifest: {request.dataset_dir / 'manifest.json'}", soft_wrap=True, highlight=False)


@app.command("verify")
def verify_cmd(data_dir: DataDir = Path("data"), dataset: DatasetName = None, quiet: Quiet = False) -> None:
    """Read every format back completely and check it against the manifest's checksums."""
    failed = False
    for dataset_dir in find_datasets(data_dir, dataset):
        reporter = _reporter(quiet)
        with reporter:
            checks, warnings = verify_dataset(dataset_dir, reporter)
        out.print(f"{dataset_dir}:", soft_wrap=True, highlight=False)
        for c in checks:
            verdict = f"OK ({c.seconds:.1f} s)" if c.ok else "FAILED: " + "; ".join(c.problems)
            out.print(f"  {c.name:<7} {verdict}", highlight=False)
            failed |= not c.ok
        if not checks:
            out.print("  no format prepared yet")
        for w in warnings:
            out.print(f"  warning: {w}", highlight=False)
    if failed:
        raise typer.Exit(1)


@app.command("info")
def info_cmd(data_dir: DataDir = Path("data"), dataset: DatasetName = None) -> None:
    """Print the manifest of each dataset as a table."""
    for dataset_dir in find_datasets(data_dir, dataset):
        m = Manifest.load(dataset_dir)
        s = m.spec
        table = Table(
            title=f"{dataset_dir}\n{s.n_samples:,} samples, shape {s.shape} {s.dtype}, {s.n_classes} classes, "
            f"seed {s.seed}, {s.payload_bytes / 1e6:,.1f} MB payload"
        )
        for col in ("format", "files", "MB", "write s", "write MB/s", "options"):
            table.add_column(col, justify="left" if col in ("format", "options") else "right")
        for e in m.formats.values():
            opts = " ".join(f"{k}={v}" for k, v in e.options.items()) or "-"
            table.add_row(
                e.name,
                str(len(e.files)),
                f"{e.bytes / 1e6:,.1f}",
                f"{e.write_seconds:.2f}",
                f"{e.write_mb_per_s:,.1f}",
                opts,
            )
        out.print(table)
        if m.content:
            out.print(f"content sha256: features {m.content['features'][:16]}…, labels {m.content['labels'][:16]}…")


@app.command("run")
def run_cmd(
    format: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--format", help=f"Comma list of {', '.join(FORMATS)}, or all (default: the standard comparison)."
        ),
    ] = None,
    loader: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help=f"Comma list of {', '.join(LOADERS)}, or all (default: dataloader, plus tensorclass on memmap; "
            "all leaves out ray unless it is named too; ray needs `pip install 'iobench[ray]'`)."
        ),
    ] = None,
    data_dir: DataDir = Path("data"),
    dataset: DatasetName = None,
    device: Annotated[str, typer.Option(help="auto (CUDA when available), cpu, cuda or cuda:N.")] = "auto",
    batch_size: Annotated[int, typer.Option(help="Samples per batch.")] = 1024,
    num_workers: Annotated[int, typer.Option(help="DataLoader worker processes (0: load in the main process).")] = 0,
    prefetch_factor: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="Batches each worker loads ahead (needs --num-workers > 0; default: torch's, 2)."),
    ] = None,
    pin_memory: Annotated[
        Optional[bool],  # noqa: UP045
        typer.Option("--pin-memory/--no-pin-memory", help="Pin host batches (default: on for CUDA, off for CPU)."),
    ] = None,
    non_blocking: Annotated[
        bool, typer.Option("--non-blocking/--blocking", help="Asynchronous host-to-device copies.")
    ] = True,
    shuffle: Annotated[bool, typer.Option("--shuffle/--no-shuffle", help="Random order, as training does.")] = True,
    block_shuffle: Annotated[int, typer.Option(help="Shuffle runs of N contiguous samples instead (0: off).")] = 0,
    persistent_workers: Annotated[
        bool, typer.Option("--persistent-workers/--no-persistent-workers", help="Keep workers between epochs.")
    ] = False,
    fetch: Annotated[str, typer.Option(help="DataLoader: item (one __getitem__ per sample) or batch.")] = "batch",
    prefetch_thread: Annotated[int, typer.Option(help="A background thread keeps K batches ready (0: off).")] = 0,
    readahead_mb: Annotated[
        int, typer.Option(help="tensorclass: MiB the kernel is asked to read ahead of sequential batches (0: off).")
    ] = 32,
    ray_address: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="ray: address of a Ray cluster (default: start a local instance); see `ray start`."),
    ] = None,
    epochs: Annotated[int, typer.Option(help="Timed epochs per run.")] = 1,
    warmup: Annotated[int, typer.Option(help="Untimed epochs before the timed ones, per run.")] = 1,
    runs: Annotated[int, typer.Option(help="Repetitions (each with a fresh loader).")] = 3,
    max_batches: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="Stop each epoch after N batches (the record says partial)."),
    ] = None,
    max_seconds: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option(help="Stop each epoch after S seconds (the record says partial)."),
    ] = None,
    step: Annotated[
        str, typer.Option(help="Per batch on the device: none, sleep:MS or mlp (one training step).")
    ] = "none",
    seed: Annotated[int, typer.Option(help="Seed of the shuffles and of the mlp step.")] = 0,
    cache: Annotated[
        str,
        typer.Option(
            help="cold: evict the dataset before every timed epoch (checked with mincore); "
            "warm: after an untimed epoch; as-is: touch nothing."
        ),
    ] = "as-is",
    eviction: Annotated[
        str, typer.Option(help="How cold evicts: auto (drop_caches as root, else fadvise), drop_caches or fadvise.")
    ] = "auto",
    profile: Annotated[
        bool,
        typer.Option("--profile", help="cProfile one extra epoch (and torch.profiler on CUDA) beside the results."),
    ] = False,
    results: Annotated[Path, typer.Option(help="JSONL file the records are appended to.")] = Path(
        "results/results.jsonl"
    ),
    nproc: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(
            help="Launch N processes on this machine with torchrun --standalone; each reads its shard "
            "(or run under torchrun yourself: `torchrun --nproc-per-node N -m iobench run ...`)."
        ),
    ] = None,
    quiet: Quiet = False,
) -> None:
    """Time loading from disk to the device: every format through the DataLoader, and tensorclass memmap.

    Under torchrun every rank reads its share of each epoch (DistributedSampler for the DataLoader,
    contiguous shares of the shared order otherwise) and rank 0 writes one record for all of them.
    """
    pairs, notes = parse_pairs(format, loader)
    settings = LoaderSettings(
        batch_size,
        num_workers,
        prefetch_factor,
        pin_memory,
        non_blocking,
        persistent_workers,
        fetch.lower(),
        prefetch_thread,
        readahead_mb,
        ray_address,
    )
    base = RunConfig(
        Path("."),
        "npy",
        "dataloader",
        settings,
        device,
        shuffle,
        block_shuffle,
        epochs,
        warmup,
        runs,
        max_batches,
        max_seconds,
        parse_step(step),
        seed,
        cache.lower(),
        eviction.lower(),
    )
    configs = [replace(base, format=f, loader=ld) for f, ld in pairs]
    for c in configs:
        check_config(c)
    if nproc is not None:
        _launch_torchrun(nproc, data_dir, dataset, device, pairs, configs, quiet)
        return
    with joined(device) as (world, own_device):
        quiet = quiet or not world.is_main  # one progress bar and one table, from rank 0
        resolve_device(own_device)
        dataset_dir = _dataset_for_run(world, data_dir, dataset, pairs, quiet)
        configs = [replace(c, dataset_dir=dataset_dir, device=own_device) for c in configs]
        for c in configs:
            check_dataset(c)
        limits = None
        if world.is_main:
            for note in notes:
                err.print(note, highlight=False)
            limits = stored_or_measured(results, dataset_dir, resolve_device(own_device), _announce_limits)
        world.barrier()  # no rank reads while rank 0 measures the machine's limits
        profile_dir = results.parent / "profiles" if profile else None
        records = []
        for c in configs:
            records.append(_run_one(c, quiet, limits, profile_dir, world))
            if world.is_main:
                append_record(results, records[-1])
    if not world.is_main:
        return
    r0 = records[0]
    ranks = f", {r0['world_size']} processes on {r0['nodes']} node(s)" if r0["world_size"] > 1 else ""
    title = (
        f"{dataset_dir.name} on {r0['device']} ({r0['gpu_name'] or r0['cpu_model']}){ranks}, "
        f"{r0['samples_per_epoch']:,} samples/epoch, step {r0['step']}"
    )
    out.print(results_table(records, title))
    out.print(split_table(records))
    for r in records:
        if r["profile_path"]:
            out.print(f"profile of {r['format']}/{r['loader']}: {r['profile_path']}", highlight=False, soft_wrap=True)
            out.print(profile_summary(Path(r["profile_path"])), highlight=False, markup=False)
    for line in run_warnings(records):
        err.print(line, highlight=False, soft_wrap=True)
    out.print(f"{len(records)} record(s) appended to {results}", highlight=False, soft_wrap=True)


def _dataset_for_run(world: World, data_dir: Path, dataset: str | None, pairs: list, quiet: bool) -> Path:
    """The dataset to measure; when there is none, the default one is prepared (by rank 0 under torchrun)."""
    found = find_run_dataset(data_dir, dataset)
    if world.all_true(found is not None):
        return found
    if world.nodes > 1:
        raise IobenchError(f"no dataset in {data_dir} on every node; run `iobench prepare` on each node first")
    if world.is_main:
        spec = DatasetSpec(DEFAULT_SIZE)
        err.print(
            f"no dataset in {data_dir}: preparing the default one ({spec.n_samples:,} samples) first; "
            f"`iobench prepare` makes others",
            highlight=False,
            soft_wrap=True,
        )
        names = tuple(dict.fromkeys(f for f, _ in pairs))
        request = PrepareRequest.with_default_options(spec, data_dir, names)
        reporter = _reporter(quiet)
        with reporter:
            prepare(request, reporter)
    world.barrier()
    return find_run_dataset(data_dir, dataset)


def _launch_torchrun(
    nproc: int, data_dir: Path, dataset: str | None, device: str, pairs: list, configs: list, quiet: bool
) -> None:
    """`--nproc N`: check and prepare here, then run these same arguments under torchrun --standalone."""
    if launched_by_torchrun():
        raise IobenchError("--nproc launches torchrun; under torchrun leave it out")
    if nproc < 1:
        raise IobenchError(f"--nproc must be >= 1, got {nproc}")
    local = World(size=nproc, local_size=nproc)
    for rank in range(nproc):
        rank_device(device, rank)
    dataset_dir = _dataset_for_run(SINGLE, data_dir, dataset, pairs, quiet)
    for c in configs:
        manifest = check_dataset(replace(c, dataset_dir=dataset_dir))
        check_world(c, manifest.spec.n_samples, local)
    args = torchrun_args(_ARGV, nproc)
    err.print(f"launching: torchrun {' '.join(args)}", highlight=False, soft_wrap=True)
    launch(args)


def _run_one(config: RunConfig, quiet: bool, limits: dict | None, profile_dir: Path | None, world: World) -> dict:
    label = f"{config.format}/{config.loader}"
    total = config.runs * (config.warmup + config.epochs)
    if quiet:
        return run(config, None, limits, profile_dir, world)
    with Progress(
        TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
    ) as progress:
        task = progress.add_task(label, total=total)

        def on_epoch(r: int, e: int, warm: bool, timing) -> None:
            kind = "warm-up" if warm else "epoch"
            progress.update(task, advance=1, description=f"{label} run {r + 1} {kind} {timing.seconds:.2f} s")

        record = run(config, on_epoch, limits, profile_dir, world)
        progress.update(task, description=f"{label} median {record['epoch_seconds_median']:.3f} s")
        return record


@app.command("sweep")
def sweep_cmd(
    preset: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help="settings (DataLoader settings on one format), formats (every format and loader, cold "
            "and warm) or scaling (dataset sizes 1e5, 1e6, 1e7)."
        ),
    ] = None,
    format: Annotated[Optional[str], typer.Option("--format", help="Comma list or all.")] = None,  # noqa: UP045
    loader: Annotated[Optional[str], typer.Option(help="Comma list or all.")] = None,  # noqa: UP045
    fetch: Annotated[Optional[str], typer.Option(help="Comma list of item, batch.")] = None,  # noqa: UP045
    batch_size: Annotated[Optional[str], typer.Option(help="Comma list, e.g. 256,1024,4096.")] = None,  # noqa: UP045
    num_workers: Annotated[Optional[str], typer.Option(help="Comma list, e.g. 0,4,8.")] = None,  # noqa: UP045
    prefetch_factor: Annotated[Optional[str], typer.Option(help="Comma list, e.g. 2,8.")] = None,  # noqa: UP045
    pin_memory: Annotated[Optional[str], typer.Option(help="Comma list of on, off.")] = None,  # noqa: UP045
    non_blocking: Annotated[Optional[str], typer.Option(help="Comma list of on, off.")] = None,  # noqa: UP045
    prefetch_thread: Annotated[Optional[str], typer.Option(help="Comma list, e.g. 0,4.")] = None,  # noqa: UP045
    cache: Annotated[Optional[str], typer.Option(help="Comma list of cold, warm, as-is.")] = None,  # noqa: UP045
    size: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="Comma list of dataset sizes (prepared when missing, default spec otherwise)."),
    ] = None,
    data_dir: DataDir = Path("data"),
    dataset: DatasetName = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    shuffle: Annotated[bool, typer.Option("--shuffle/--no-shuffle", help="Random order, as training does.")] = True,
    epochs: Annotated[int, typer.Option(help="Timed epochs per run.")] = 1,
    warmup: Annotated[int, typer.Option(help="Untimed epochs before the timed ones, per run.")] = 1,
    runs: Annotated[int, typer.Option(help="Repetitions per configuration.")] = 5,
    max_seconds: Annotated[
        Optional[float], typer.Option(help="Stop each epoch after S seconds (partial).")  # noqa: UP045
    ] = None,
    step: Annotated[str, typer.Option(help="none, sleep:MS or mlp.")] = "none",
    results: Annotated[Path, typer.Option(help="JSONL file; configurations already in it are skipped.")] = Path(
        "results/results.jsonl"
    ),
    quiet: Quiet = False,
) -> None:
    """Run a grid of configurations (resumable: what the results file holds is not run again)."""
    target = resolve_device(device)
    base = RunConfig(
        Path("."),
        "memmap",
        "dataloader",
        LoaderSettings(),
        device,
        shuffle,
        0,
        epochs,
        warmup,
        runs,
        None,
        max_seconds,
        parse_step(step),
        0,
    )
    grid, sizes = sweep_grid(
        preset,
        base,
        target,
        format=format,
        loader=loader,
        fetch=fetch,
        batch_size=batch_size,
        num_workers=num_workers,
        prefetch_factor=prefetch_factor,
        pin_memory=pin_memory,
        non_blocking=non_blocking,
        prefetch_thread=prefetch_thread,
        cache=cache,
        size=size,
    )
    points, notes = expand(base, grid, sizes, target)
    if preset == "settings":
        points += [Point(None, c) for c in settings_extras(base, grid["format"][0])]
    if notes:
        err.print(
            f"{len(notes)} combination(s) skipped because they do not go together, e.g. {notes[0]}",
            highlight=False,
            soft_wrap=True,
        )
    dirs = sweep_datasets(points, data_dir, dataset, quiet)
    already = done(results)
    todo = [
        (p, dirs[p.size])
        for p in points
        if config_identity(replace(p.config, dataset_dir=dirs[p.size]), target) not in already
    ]
    err.print(
        f"{len(points)} configuration(s), {len(points) - len(todo)} already in {results}, {len(todo)} to run",
        highlight=False,
        soft_wrap=True,
    )
    if not todo:
        return
    limits = stored_or_measured(results, todo[0][1], target, _announce_limits)
    with Progress(
        TextColumn("{task.description:<60}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet,
    ) as progress:
        task = progress.add_task("sweep", total=len(todo))
        for k, (point, dataset_dir) in enumerate(todo):
            config = replace(point.config, dataset_dir=dataset_dir)
            progress.update(
                task, description=f"{k + 1}/{len(todo)} {config.format}/{config.loader} {dataset_dir.name[:24]}"
            )
            record = run(config, None, limits)
            append_record(results, record)
            progress.advance(task)
    out.print(
        f"{len(todo)} record(s) appended to {results}; `iobench report {results}` makes the report",
        highlight=False,
        soft_wrap=True,
    )


@app.command("report")
def report_cmd(
    results: Annotated[Path, typer.Argument(help="A results JSONL file.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for report.md and its PNG plots.")] = Path("report"),
) -> None:
    """Write a Markdown report with tables and plots from result records."""
    from iobench.results.report import write_report  # matplotlib loads only when a report is made

    path = write_report(results, out_dir)
    out.print(f"report: {path}", highlight=False, soft_wrap=True)


@app.command("compare")
def compare_cmd(
    a: Annotated[Path, typer.Argument(help="Baseline results JSONL.")],
    b: Annotated[Path, typer.Argument(help="Results to compare with the baseline.")],
) -> None:
    """Print the relative change of MB/s per configuration present in both files."""
    from iobench.results.report import compare, describe

    pairs, only_a, only_b = compare(a, b)
    table = Table(title=f"{b} against {a}")
    for col in ("configuration", "A MB/s", "B MB/s", "change"):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for ra, rb, change in pairs:
        table.add_row(describe(ra), f"{ra['mb_per_s']:,.1f}", f"{rb['mb_per_s']:,.1f}", f"{change:+.1%}")
    out.print(table)
    out.print(f"{len(pairs)} matching configuration(s); {only_a} only in A, {only_b} only in B", highlight=False)


@app.command("limits")
def limits_cmd(
    data_dir: DataDir = Path("data"),
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N (CUDA adds host-to-device figures).")] = "auto",
    results: Annotated[Path, typer.Option(help="limits.json is stored beside this results file.")] = Path(
        "results/results.jsonl"
    ),
    probe_size: Annotated[str, typer.Option(help="Size of the probe file written and read (e.g. 1G, 256M).")] = "1G",
) -> None:
    """Measure this machine's ceilings: storage and page-cache read bandwidth, host-to-device, device copies."""
    probe = parse_bytes(probe_size)
    target = resolve_device(device)
    err.print(f"measuring with a {probe / 2**20:,.0f} MiB probe file in {data_dir} ...", highlight=False)
    limits = measure_limits(data_dir, target, probe)
    path = save_limits(results, data_dir, limits)
    out.print(limits_table(limits))
    out.print(f"stored in {path}", highlight=False, soft_wrap=True)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        out.print(f"iobench {__version__}")
        raise typer.Exit(0)
    command = ctx.invoked_subcommand
    if command is not None and command != "run" and launched_by_torchrun():
        raise IobenchError(f"`iobench {command}` does not run under torchrun (every rank would do all of it); only run")


# typer raises click's exceptions, or since typer 0.20 those of its own vendored copy of click.
_CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


_signals_received: list[int] = []
_ARGV: list[str] = sys.argv[1:]  # the command line as given, for --nproc to pass on to torchrun


def _terminate(signum: int, _frame: object) -> None:
    # typer swallows KeyboardInterrupt into a bare exit code; remember why we stop to say so.
    _signals_received.append(signum)
    raise KeyboardInterrupt(f"signal {signum}")


def _rank_tag() -> str:
    """Under torchrun each rank reports its own errors: say which one speaks."""
    return f"rank {os.environ['RANK']}: " if launched_by_torchrun() else ""


def _interrupted() -> None:
    err.print("iobench: interrupted; nothing half-written was kept", highlight=False)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every expected failure becomes one line on stderr and exit code 2."""
    signal.signal(signal.SIGTERM, _terminate)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _terminate)
    command = typer.main.get_command(app)
    global _ARGV
    _ARGV = list(sys.argv[1:] if argv is None else argv)
    try:
        rc = command.main(args=argv, prog_name="iobench", standalone_mode=False)
    except IobenchError as exc:
        err.print(f"iobench: error: {_rank_tag()}{exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except _CLICK_ERROR as exc:
        err.print(f"iobench: error: {exc.format_message()}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        _interrupted()
        sys.exit(130)
    if _signals_received:
        _interrupted()
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)
