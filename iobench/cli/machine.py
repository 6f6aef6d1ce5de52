"""`limits` and `doctor`: this machine's ceilings and what the numbers rest on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.console import ConsoleEvents, out, say
from iobench.errors import IobenchError

MAX_IDLE_SECONDS = 3600.0


@app.command("limits")
def limits_cmd(
    data_dir: o.DataDir = Path("data"),
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N (CUDA adds host-to-device figures).")] = "auto",
    results: Annotated[Path, typer.Option(help="limits.json is stored beside this results file.")] = Path(
        "results/results.jsonl"
    ),
    probe_size: Annotated[str, typer.Option(help="Size of the probe file written and read (e.g. 1G, 256M).")] = "1G",
    read_limit: o.ReadLimit = None,
    keep_best: Annotated[
        bool,
        typer.Option(
            "--keep-best",
            help="Keep each ceiling's best of this and the stored measurement (measure before and after a "
            "study: a shared disk's speed moves between minutes).",
        ),
    ] = False,
) -> None:
    """Measure this machine's ceilings: storage and page-cache read bandwidth, host-to-device, device copies."""
    from iobench.loaders.device import resolve_device
    from iobench.measuring.limits import best_of, load_limits, measure_limits, save_limits
    from iobench.results.store import check_writable, limits_path
    from iobench.results.tables import limits_table
    from iobench.storage.local.confine import check_read_limit
    from iobench.units import parse_bytes

    probe = parse_bytes(probe_size)
    check_read_limit(read_limit)
    target = resolve_device(device)
    check_writable(limits_path(results))
    events = ConsoleEvents(limits_message=f"measuring in {data_dir} ...")
    limits = measure_limits(data_dir, target, probe, events=events, read_limit=read_limit)
    stored = load_limits(results, data_dir, read_limit) if keep_best else None
    if stored is not None:
        limits = best_of(stored, limits)
    path = save_limits(results, data_dir, limits)
    out.print(limits_table(limits))
    read = limits.probe_file if limits.probe_file.startswith("/") else "a fresh probe file"
    out.print(f"read {read} ({limits.probe_bytes / 2**20:,.0f} MiB)", highlight=False, soft_wrap=True, markup=False)
    out.print(f"stored in {path}", highlight=False, soft_wrap=True, markup=False)


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
    from rich.table import Table

    from iobench.loaders.device import resolve_device
    from iobench.run.doctor import examine

    if not 0 <= idle_seconds <= MAX_IDLE_SECONDS:  # also refuses nan
        raise IobenchError(f"--idle-seconds must be 0..{MAX_IDLE_SECONDS:g}, got {idle_seconds:g}")
    if not data_dir.is_dir():  # a mistyped folder is named, not created
        raise IobenchError(f"--data-dir {data_dir}: no such folder")
    target = resolve_device(device)
    if idle_seconds > 0:
        say(f"checking; this leaves a file idle for {idle_seconds:g} s (--idle-seconds 0 skips that) ...")
    findings = examine(data_dir, target, idle_seconds)
    table = Table(title=f"iobench doctor: {data_dir} on {target}")
    for col in ("check", "result", "what it means"):
        table.add_column(col)
    for f in findings:
        table.add_row(f.check, f.status.value, f.detail)
    out.print(table)
