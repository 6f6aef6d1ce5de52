"""The `iobench` command line: parses, calls, prints. No logic a test would want to call."""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from iobench import __version__
from iobench import cli_options as o
from iobench.choices import parse_ints, split_list
from iobench.data.manifest import Manifest, find_datasets
from iobench.data.prepare import PrepareRequest, parse_formats, plan, prepare
from iobench.data.spec_options import SpecOptions, build_spec
from iobench.data.verify import verify_dataset
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.progress import NullReporter, RichReporter, make_reporter
from iobench.results.record import EpochTiming, MachineLimits, RunRecord
from iobench.results.store import append_record, check_writable, limits_path, load_records
from iobench.results.tables import (
    au_text,
    limits_table,
    profile_summary,
    results_table,
    split_table,
)
from iobench.results.warnings import record_warnings
from iobench.results.whatif import error, predict
from iobench.run.config import ResolvedRun, RunConfig, RunTarget, order_of, settle_device
from iobench.run.confine import check_read_limit
from iobench.run.device import resolve_device
from iobench.run.distributed import SINGLE, joined, launched_by_torchrun
from iobench.run.limits import measure_limits, save_limits, stored_or_measured
from iobench.run.loaders.base import LoaderSettings
from iobench.run.runner import run
from iobench.run.selection import parse_pairs
from iobench.run.session import dataset_for_run, launch_torchrun, resolve_all
from iobench.run.sweep import Point, expand, run_sweep, settings_extras, still_to_run
from iobench.run.sweep_options import sweep_datasets, sweep_grid
from iobench.units import DEFAULT_SIZE, parse_bytes

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
# markup off: paths and values are printed as they are ("data[1]" is not a style tag).
out = Console(width=_WIDTH, markup=False)
err = Console(stderr=True, width=None if sys.stderr.isatty() else int(os.environ.get("COLUMNS", "180")), markup=False)


def _say(text: str) -> None:
    """One message on stderr, printed as it is (paths may hold [brackets] that rich would read as markup)."""
    err.print(text, highlight=False, soft_wrap=True, markup=False)


def _announce_limits() -> None:
    _say("no stored limits for this machine and disk: measuring them once (`iobench limits`)")


def _reporter(quiet: bool) -> RichReporter | NullReporter:
    return make_reporter(quiet, err)


@app.command("prepare")
def prepare_cmd(
    size: Annotated[
        str | None,
        typer.Option(help=f"Number of samples: 1e7, 10000000, 10_000_000 or 10M [default: {DEFAULT_SIZE:.0e}]."),
    ] = None,
    formats: Annotated[
        str,
        typer.Option(
            help=f"Comma list of {', '.join(FORMATS)}, or all. files (one file per sample: a million files for "
            "the default size) is written when named or with all."
        ),
    ] = ",".join(n for n in FORMATS if n != "files"),
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    workload: Annotated[
        str,
        typer.Option(
            help="What the samples look like: tabular (128 float32, random), image (3x224x224 uint8 photo-like), "
            "small-image (3x32x32 uint8 photo-like) or tokens (2048 int32 ids). --shape/--dtype override it."
        ),
    ] = "tabular",
    shape: Annotated[
        str | None, typer.Option(help="Per-sample shape, e.g. 128 or 3,32,32 (default: the workload's).")
    ] = None,
    dtype: Annotated[
        str | None,
        typer.Option(help="Feature dtype: float32, float16, float64, uint8, int8..int64 (default: the workload's)."),
    ] = None,
    classes: Annotated[int | None, typer.Option(help="Number of label classes [default: 1000].")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the deterministic generator [default: 0].")] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Your own data instead of generated: X.npy, D.npz, F.h5:NAME, a TensorDict memmap folder, or an "
            "image folder in class sub-folders (resized and centre-cropped to --shape C,H,W).",
        ),
    ] = None,
    labels: Annotated[
        str | None, typer.Option(help="With --from X.npy or F.h5:NAME: the labels, Y.npy or F.h5:NAME (else zeros).")
    ] = None,
    features_key: Annotated[
        str | None, typer.Option(help="With --from D.npz or a TensorDict: the features' key [default: features].")
    ] = None,
    labels_key: Annotated[
        str | None, typer.Option(help="With --from D.npz or a TensorDict: the labels' key [default: labels].")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite formats (or a different dataset) already there.")
    ] = False,
    hdf5_chunk_rows: Annotated[int, typer.Option(help="HDF5 rows per chunk; 0 = about 64 KiB of features.")] = 0,
    hdf5_compression: Annotated[str, typer.Option(help="HDF5 compression: none, lzf or gzip.")] = "none",
    hdf5_gzip_level: Annotated[int, typer.Option(help="gzip level 0..9 when --hdf5-compression gzip.")] = 4,
    lmdb_samples_per_record: Annotated[int, typer.Option(help="Samples in one LMDB record.")] = 1,
    quiet: o.Quiet = False,
) -> None:
    """Generate the shared dataset, or read yours (--from), and write it in each format (atomically)."""
    spec = build_spec(
        SpecOptions(
            size=size,
            workload=workload,
            shape=shape,
            dtype=dtype,
            classes=classes,
            seed=seed,
            source=source,
            labels=labels,
            features_key=features_key,
            labels_key=labels_key,
        )
    )
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
def verify_cmd(data_dir: o.DataDir = Path("data"), dataset: o.DatasetName = None, quiet: o.Quiet = False) -> None:
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
def info_cmd(data_dir: o.DataDir = Path("data"), dataset: o.DatasetName = None) -> None:
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
    format: o.Formats = None,
    loader: o.Loaders = None,
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    device: o.Device = "auto",
    batch_size: o.BatchSize = 1024,
    num_workers: o.NumWorkers = 0,
    prefetch_factor: o.PrefetchFactor = None,
    pin_memory: o.PinMemory = None,
    non_blocking: o.NonBlocking = True,
    shuffle: o.Shuffle = True,
    block_shuffle: o.BlockShuffle = 0,
    persistent_workers: o.PersistentWorkers = False,
    in_order: o.InOrder = True,
    fetch: o.Fetch = "batch",
    prefetch_thread: o.PrefetchThread = 0,
    readahead_mb: o.ReadaheadMb = 32,
    ray_address: o.RayAddress = None,
    epochs: o.Epochs = 1,
    warmup: o.Warmup = 1,
    runs: o.Runs = 3,
    max_batches: o.MaxBatches = None,
    max_seconds: o.MaxSeconds = None,
    step: o.Step = "none",
    min_au: o.MinAu = None,
    what_if: o.WhatIf = None,
    seed: o.Seed = 0,
    cache: o.Cache = "warm",
    eviction: o.Eviction = "auto",
    read_limit: o.ReadLimit = None,
    cache_budget: o.CacheBudget = None,
    transform: o.Transform = "none",
    transform_on: o.TransformOn = "host",
    profile: o.Profile = False,
    results: o.Results = Path("results/results.jsonl"),
    nproc: o.Nproc = None,
    quiet: o.Quiet = False,
) -> None:
    """Time loading from disk to the device: every format through the DataLoader, and tensorclass memmap.

    Under torchrun every rank reads its share of each epoch (DistributedSampler for the DataLoader,
    contiguous shares of the shared order otherwise) and rank 0 writes one record for all of them.
    """
    pairs, notes = parse_pairs(format, loader)
    what_if_ms = _step_times(what_if, nproc is not None or launched_by_torchrun()) if what_if else None
    if min_au is not None and not 0 <= min_au <= 1:
        raise IobenchError(f"--min-au is a share between 0 and 1 (0.9 for 90%), got {min_au}")
    settings = LoaderSettings(**{k: v for k, v in locals().items() if k in LoaderSettings.__dataclass_fields__})
    options = dict(shuffle=shuffle, block_size=block_shuffle, epochs=epochs, warmup=warmup, runs=runs)
    options.update(max_batches=max_batches, max_seconds=max_seconds, step=step, seed=seed, cache=cache)
    options.update(read_limit_mb_per_s=read_limit, cache_budget=cache_budget)
    options.update(transform=transform, transform_on=transform_on)
    configs = [_config(f, ld, settings, eviction=eviction, **options) for f, ld in pairs]
    if nproc is not None:
        launch_torchrun(nproc, _ARGV, data_dir, dataset, device, configs, _say, lambda: _reporter(quiet))
        return
    check_writable(results)
    with joined(device) as (world, own_device):
        quiet = quiet or not world.is_main  # one progress bar and one table, from rank 0
        target_device = resolve_device(own_device)
        configs = [settle_device(c, target_device) for c in configs]  # machine checks before any dataset
        formats = tuple(dict.fromkeys(f for f, _ in pairs))
        dataset_dir = dataset_for_run(world, data_dir, dataset, formats, _say, lambda: _reporter(quiet))
        todo = resolve_all(configs, RunTarget(dataset_dir, target_device), world)
        limits = None
        if world.is_main:
            for note in notes:
                _say(note)
            limits = stored_or_measured(results, dataset_dir, target_device, _announce_limits, read_limit)
        world.barrier()  # no rank reads while rank 0 measures the machine's limits
        profile_dir = results.parent / "profiles" if profile else None
        records = []
        for resolved in todo:
            records.append(_run_one(resolved, quiet, limits, profile_dir))
            if world.is_main:
                _save(results, records[-1])
    if world.is_main:
        _print_run(records, dataset_dir.name, results, min_au)
        if what_if_ms:
            _what_if(todo, records, what_if_ms, results, limits, quiet)


def _step_times(text: str, ranks: bool) -> list[float]:
    if ranks:
        raise IobenchError("--what-if measures its checks in one process; run it without torchrun or --nproc")
    try:
        values = [float(x) for x in split_list(text, "--what-if step time")]
    except ValueError:
        raise IobenchError(f"--what-if takes step times in ms, e.g. 2.5,10; got {text!r}") from None
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise IobenchError(f"--what-if step times must be >= 0 ms, got {text!r}")
    return values


def _what_if(
    todo: list[ResolvedRun],
    records: list[RunRecord],
    steps_ms: list[float],
    results: Path,
    limits: MachineLimits | None,
    quiet: bool,
) -> None:
    """Predict each configuration at other step times, then measure them to show the model's error."""
    table = Table(title="what-if: predicted from the run above, then measured with that step")
    for col in ("configuration", "step now", "samples/s now", "what-if step", "predicted samples/s",
                "predicted AU", "bound", "measured samples/s", "error"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("configuration", "bound") else "right")
    for resolved, record in zip(todo, records, strict=True):
        for ms in steps_ms:
            p = predict(record, ms)
            check = replace(resolved, config=replace(resolved.config, step=f"sleep:{ms:g}"))
            measured = _run_one(check, quiet, limits, None)
            _save(results, measured)
            rate = f"{p.samples_per_s_low:,.0f}" + (
                f"-{p.samples_per_s_high:,.0f}" if p.samples_per_s_high > p.samples_per_s_low * 1.005 else ""
            )
            au = f"{p.utilisation_low:.0%}" + (
                f"-{p.utilisation_high:.0%}" if p.utilisation_high > p.utilisation_low + 0.005 else ""
            )
            table.add_row(
                record.label, record.config.step, f"{record.epochs.samples_per_s:,.0f}", f"sleep:{ms:g}", rate, au,
                p.bound, f"{measured.epochs.samples_per_s:,.0f}", f"{error(p, measured):+.1%}",
            )  # fmt: skip
    out.print(table)


def _config(fmt: str, loader: str, settings: LoaderSettings, *, shuffle: bool, block_size: int, **kw) -> RunConfig:
    """A run configuration from command-line values (shared by run and sweep): strings become enums."""
    return RunConfig(
        format=fmt, loader=loader, settings=settings, order=order_of(shuffle, block_size), block_size=block_size, **kw
    )


def _print_run(records: list[RunRecord], dataset_name: str, results: Path, min_au: float | None = None) -> None:
    r0 = records[0]
    c = r0.config
    ranks = f", {c.world_size} processes on {r0.ranks.nodes} node(s)" if c.world_size > 1 else ""
    title = (
        f"{dataset_name} on {c.device} ({r0.environment.gpu_name or r0.environment.cpu_model}){ranks}, "
        f"{r0.epochs.samples_per_epoch:,} samples/epoch, step {c.step}"
    )
    out.print(results_table(records, title))
    out.print(split_table(records))
    for r in records:
        if r.system.profile_path:
            out.print(f"profile of {r.label}: {r.system.profile_path}", highlight=False, soft_wrap=True, markup=False)
            out.print(profile_summary(Path(r.system.profile_path)), highlight=False, markup=False)
    for w in record_warnings(records, min_au):
        _say(w.console())
    out.print(f"{len(records)} record(s) appended to {results}", highlight=False, soft_wrap=True, markup=False)


def _save(results: Path, record: RunRecord) -> None:
    """Append the record; if that fails after a long measurement, keep it somewhere and say where."""
    try:
        append_record(results, record)
    except IobenchError as exc:
        rescue = Path(tempfile.gettempdir()) / f"iobench-unsaved-{os.getpid()}.jsonl"
        try:
            append_record(rescue, record)
            _say(f"{exc}; the record was saved to {rescue} instead")
        except IobenchError:
            _say(f"{exc}; the record follows on stderr")
            err.print(json.dumps(record.to_json()), highlight=False, soft_wrap=True, markup=False)
        raise


def _run_one(resolved: ResolvedRun, quiet: bool, limits: MachineLimits | None, profile_dir: Path | None) -> RunRecord:
    c = resolved.config
    label = c.label
    total = c.runs * (c.warmup + c.epochs)
    if quiet:
        return run(resolved, None, limits, profile_dir)
    with Progress(
        TextColumn("{task.description:<40}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
    ) as progress:
        task = progress.add_task(label, total=total)

        def on_epoch(r: int, e: int, warm: bool, timing: EpochTiming) -> None:
            kind = "warm-up" if warm else "epoch"
            progress.update(task, advance=1, description=f"{label} run {r + 1} {kind} {timing.seconds:.2f} s")

        record = run(resolved, on_epoch, limits, profile_dir)
        progress.update(task, description=f"{label} median {record.epochs.epoch_seconds_median:.3f} s")
        return record


@app.command("sweep")
def sweep_cmd(
    preset: o.Preset = None,
    format: o.List("--format", "Comma list or all.") = None,
    loader: o.List("--loader", "Comma list or all.") = None,
    fetch: o.List("--fetch", "Comma list of item, batch.") = None,
    batch_size: o.List("--batch-size", "Comma list, e.g. 256,1024,4096.") = None,
    num_workers: o.List("--num-workers", "Comma list, e.g. 0,4,8.") = None,
    prefetch_factor: o.List("--prefetch-factor", "Comma list, e.g. 2,8.") = None,
    pin_memory: o.List("--pin-memory", "Comma list of on, off.") = None,
    non_blocking: o.List("--non-blocking", "Comma list of on, off.") = None,
    prefetch_thread: o.List("--prefetch-thread", "Comma list, e.g. 0,4.") = None,
    cache: o.List("--cache", "Comma list of cold, warm, as-is.") = None,
    size: o.List("--size", "Comma list of dataset sizes (prepared when missing, default spec otherwise).") = None,
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    device: o.Device = "auto",
    shuffle: o.Shuffle = True,
    epochs: o.Epochs = 1,
    warmup: o.Warmup = 1,
    runs: o.Runs = 5,
    max_seconds: o.MaxSeconds = None,
    step: o.Step = "none",
    read_limit: o.ReadLimit = None,
    cache_budget: o.CacheBudget = None,
    transform: o.Transform = "none",
    transform_on: o.TransformOn = "host",
    results: Annotated[Path, typer.Option(help="JSONL file; configurations already in it are skipped.")] = Path(
        "results/results.jsonl"
    ),
    quiet: o.Quiet = False,
) -> None:
    """Run a grid of configurations (resumable: what the results file holds is not run again)."""
    target = resolve_device(device)
    check_writable(results)
    base = _config(
        "memmap",
        "dataloader",
        LoaderSettings(),
        shuffle=shuffle,
        block_size=0,
        epochs=epochs,
        warmup=warmup,
        runs=runs,
        max_seconds=max_seconds,
        step=step,
        read_limit_mb_per_s=read_limit,
        cache_budget=cache_budget,
        transform=transform,
        transform_on=transform_on,
    )
    lists = dict(format=format, loader=loader, fetch=fetch, batch_size=batch_size, num_workers=num_workers)
    lists.update(prefetch_factor=prefetch_factor, pin_memory=pin_memory, non_blocking=non_blocking)
    grid, sizes = sweep_grid(preset, base, target, prefetch_thread=prefetch_thread, cache=cache, size=size, **lists)
    points, notes = expand(base, grid, sizes, target)
    if preset == "settings":
        points += [Point(None, c) for c in settings_extras(base, grid["format"][0])]
    if notes:
        _say(f"{len(notes)} combination(s) skipped because they do not go together, e.g. {notes[0]}")
    dirs = sweep_datasets(points, data_dir, dataset, quiet)
    todo = still_to_run(points, dirs, target, results)
    _say(f"{len(points)} configuration(s), {len(points) - len(todo)} already in {results}, {len(todo)} to run")
    if not todo:
        return
    limits = stored_or_measured(results, todo[0].dataset_dir, target, _announce_limits, read_limit)
    columns = (
        TextColumn("{task.description:<60}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, TimeRemainingColumn(), console=err, disable=quiet) as progress:
        task = progress.add_task("sweep", total=len(todo))

        def on_start(k: int, resolved: ResolvedRun) -> None:
            name = f"{k + 1}/{len(todo)} {resolved.config.label} {resolved.dataset_dir.name[:24]}"
            progress.update(task, completed=k, description=name)

        run_sweep(todo, results, limits, on_start)
        progress.update(task, completed=len(todo))
    out.print(
        f"{len(todo)} record(s) appended to {results}; `iobench report {results}` makes the report",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


@app.command("report")
def report_cmd(
    results: Annotated[Path, typer.Argument(help="A results JSONL file.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for report.md and its PNG plots.")] = Path("report"),
) -> None:
    """Write a Markdown report with tables and plots from result records."""
    from iobench.results.report import write_report  # matplotlib loads only when a report is made

    skipped: list[str] = []
    path = write_report(results, out_dir, skipped)
    for line in skipped:
        _say(f"warning: {line}")
    out.print(f"report: {path}", highlight=False, soft_wrap=True, markup=False)


@app.command("compare")
def compare_cmd(
    a: Annotated[Path, typer.Argument(help="Baseline results JSONL.")],
    b: Annotated[Path, typer.Argument(help="Results to compare with the baseline.")],
) -> None:
    """Print the relative change of MB/s per configuration present in both files."""
    from iobench.results.report import compare, describe

    for path in (a, b):
        for line in load_records(path).skipped:
            _say(f"warning: {line}")
    pairs, only_a, only_b = compare(a, b)
    table = Table(title=escape(f"{b} against {a}"))
    for col in ("configuration", "A MB/s", "B MB/s", "change"):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for ra, rb, change in pairs:
        shown = f"{change:+.1%}" if math.isfinite(change) else "- (A is 0)"
        table.add_row(describe(ra), f"{ra.epochs.mb_per_s:,.1f}", f"{rb.epochs.mb_per_s:,.1f}", shown)
    out.print(table)
    out.print(f"{len(pairs)} matching configuration(s); {only_a} only in A, {only_b} only in B", highlight=False)


@app.command("limits")
def limits_cmd(
    data_dir: o.DataDir = Path("data"),
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N (CUDA adds host-to-device figures).")] = "auto",
    results: Annotated[Path, typer.Option(help="limits.json is stored beside this results file.")] = Path(
        "results/results.jsonl"
    ),
    probe_size: Annotated[str, typer.Option(help="Size of the probe file written and read (e.g. 1G, 256M).")] = "1G",
    read_limit: o.ReadLimit = None,
) -> None:
    """Measure this machine's ceilings: storage and page-cache read bandwidth, host-to-device, device copies."""
    probe = parse_bytes(probe_size)
    check_read_limit(read_limit)
    target = resolve_device(device)
    check_writable(limits_path(results))
    saying = f"measuring in {data_dir} ..."
    limits = measure_limits(data_dir, target, probe, announce=lambda: _say(saying), read_limit=read_limit)
    path = save_limits(results, data_dir, limits)
    out.print(limits_table(limits))
    read = limits.probe_file if limits.probe_file.startswith("/") else f"a probe file of {probe / 2**20:,.0f} MiB"
    out.print(f"read {read} ({limits.probe_bytes / 2**20:,.0f} MiB)", highlight=False, soft_wrap=True, markup=False)
    out.print(f"stored in {path}", highlight=False, soft_wrap=True, markup=False)


@app.command("tune")
def tune_cmd(
    format: Annotated[str, typer.Option("--format", help=f"The format to tune: one of {', '.join(FORMATS)}.")],
    step: o.Step = "none",
    budget_minutes: Annotated[float, typer.Option(help="Time the search may take.")] = 5.0,
    batch_size: o.List("--batch-size", "Batch size, or a comma list to search over (e.g. 256,1024).") = "1024",
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    device: o.Device = "auto",
    shuffle: o.Shuffle = True,
    cache: o.Cache = "warm",
    results: Annotated[Path, typer.Option(help="JSONL file; a stopped search resumes from it.")] = Path(
        "results/tune.jsonl"
    ),
    quiet: o.Quiet = False,
) -> None:
    """Search DataLoader settings (workers, prefetch, persistence, order, pinning) for your data and machine."""
    from iobench.run.tune import candidates, settings_text, tune

    target = resolve_device(device)
    check_writable(results)
    if not (math.isfinite(budget_minutes) and budget_minutes > 0):
        raise IobenchError(f"--budget-minutes must be a number > 0, got {budget_minutes}")
    sizes = parse_ints(batch_size, "batch-size")
    base = _config(format.lower(), "dataloader", LoaderSettings(batch_size=sizes[0]), shuffle=shuffle, block_size=0)
    base = replace(base, step=step, cache=cache)
    fmt = base.format
    dataset_dir = dataset_for_run(SINGLE, data_dir, dataset, (fmt,), _say, lambda: _reporter(quiet))
    found = candidates(base, fmt, target.type == "cuda", sizes if "," in batch_size else None, fmt == "memmap")
    limits = stored_or_measured(results, dataset_dir, target, _announce_limits)
    _say(f"tuning {fmt} on {target}: {len(found)} candidate settings, at most {budget_minutes:g} min")
    columns = (TextColumn("{task.description:<60}", markup=False), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, disable=quiet) as progress:
        task = progress.add_task("tune", total=budget_minutes * 60)

        def on_round(k: int, n: int, cand) -> None:
            label = f"round {k + 1}: {cand.config.label} {settings_text(cand.config)}"
            progress.update(task, completed=time.monotonic() - started, description=label)

        started = time.monotonic()
        outcome = tune(found, RunTarget(dataset_dir, target), budget_minutes * 60, results, limits, on_round)
    _print_tune(outcome, results)


def _print_tune(outcome, results: Path) -> None:
    from iobench.run.tune import dataloader_line, settings_text

    table = Table(title=f"tune: {outcome.rounds} round(s) in {outcome.seconds:.0f} s, stopped: {outcome.stopped}")
    for col in ("rank", "loader", "settings", "samples/s median", "95% CI of the mean", "epochs", "AU (step)"):
        table.add_column(col, justify="left" if col in ("loader", "settings") else "right")
    for i, c in enumerate(outcome.ranked[:12], 1):
        low, high = c.interval()
        ci = f"{low:,.0f}-{high:,.0f}" if math.isfinite(high) else "-"
        last = c.records[-1]
        table.add_row(str(i), c.config.loader.value, settings_text(c.config), f"{c.median:,.0f}", ci,
                      str(len(c.rates)), au_text(last))  # fmt: skip
    out.print(table)
    best = outcome.best
    low, high = best.interval()
    spread = f"{min(best.rates):,.0f}-{max(best.rates):,.0f}"
    out.print(f"best: {best.config.label} {settings_text(best.config)}: {best.median:,.0f} samples/s "
              f"(epochs {spread}; 95% CI {low:,.0f}-{high:,.0f})")  # fmt: skip
    near = outcome.within_noise()
    if near:
        out.print("within noise of it: " + "; ".join(f"{c.config.label} {settings_text(c.config)}" for c in near[:4]))
    by_cores: dict[int, float] = {}
    for c in outcome.ranked:
        by_cores[c.cores] = max(by_cores.get(c.cores, 0.0), c.median)
    out.print("throughput by loading processes: " + ", ".join(
        f"{n}: {rate:,.0f} samples/s" for n, rate in sorted(by_cores.items())))  # fmt: skip
    out.print("paste:\n" + dataloader_line(best.config))
    out.print(f"records of every round in {results}; `iobench report {results}` shows the search")


MAX_IDLE_SECONDS = 3600.0


@app.command("doctor")
def doctor_cmd(
    data_dir: o.DataDir = Path("data"),
    device: o.Device = "auto",
    idle_seconds: Annotated[
        float,
        typer.Option(
            help="How long a warm file is left idle to see whether the machine reclaims page cache (0: skip)."
        ),
    ] = 75.0,
) -> None:
    """Check what iobench's numbers rest on here: eviction, page-cache reclaim, cgroups, cores, the GPU path."""
    from iobench.run.doctor import examine

    if not 0 <= idle_seconds <= MAX_IDLE_SECONDS:  # also refuses nan
        raise IobenchError(f"--idle-seconds must be 0..{MAX_IDLE_SECONDS:g}, got {idle_seconds:g}")
    if not data_dir.is_dir():  # a mistyped folder is named, not created
        raise IobenchError(f"--data-dir {data_dir}: no such folder")
    target = resolve_device(device)
    if idle_seconds > 0:
        _say(f"checking; this leaves a file idle for {idle_seconds:g} s (--idle-seconds 0 skips that) ...")
    findings = examine(data_dir, target, idle_seconds)
    table = Table(title=f"iobench doctor: {data_dir} on {target}")
    for col in ("check", "result", "what it means"):
        table.add_column(col)
    for f in findings:
        table.add_row(f.check, f.status.value, f.detail)
    out.print(table)


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


_INTERRUPTED = "iobench: interrupted; nothing half-written was kept"


def _interrupted() -> None:
    _say(_INTERRUPTED)


def _ending(message: str, *, in_process: bool) -> None:
    """The last line of a failed or interrupted command. A DataLoader worker that dies now (the
    command is ending anyway) must not have torch's SIGCHLD handler raise its news inside the print."""
    torch_handler = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _say(message)
    if in_process and torch_handler is not None:  # later loaders in the caller's process rely on it
        signal.signal(signal.SIGCHLD, torch_handler)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every expected failure becomes one line on stderr and exit code 2."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, _terminate)
    if previous[signal.SIGINT] is signal.default_int_handler:
        signal.signal(signal.SIGINT, _terminate)
    try:
        _main(argv)
    finally:
        if argv is None:
            # The process ends now and everything is written: a late Ctrl-C has nothing left to stop,
            # and raised inside the interpreter's exit callbacks it would only print a traceback.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        else:  # called in-process (tests): the caller gets its handlers back
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _main(argv: list[str] | None) -> None:
    command = typer.main.get_command(app)
    global _ARGV
    _ARGV = list(sys.argv[1:] if argv is None else argv)
    try:
        rc = command.main(args=argv, prog_name="iobench", standalone_mode=False)
    except IobenchError as exc:
        _ending(f"iobench: error: {_rank_tag()}{exc}", in_process=argv is not None)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except _CLICK_ERROR as exc:
        _say(f"iobench: error: {exc.format_message()}")
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        _ending(_INTERRUPTED, in_process=argv is not None)
        sys.exit(130)
    if _signals_received:
        _interrupted()
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)
