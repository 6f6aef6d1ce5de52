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
    remote: Annotated[
        str | None,
        typer.Option(
            help="Object storage's ceilings instead: a prepared dataset served by iobench's S3 server through this "
            "profile (s3-like, express-like, none), and without it. Stored in remote_limits.json.",
            metavar="PROFILE",
        ),
    ] = None,
    endpoint_url: Annotated[
        str | None,
        typer.Option(
            help="Object storage's ceilings of the store at this URL, http(s)://host:port/bucket (port and bucket "
            "optional; the dataset uploaded there by `iobench upload`).",
            metavar="URL",
        ),
    ] = None,
    latency_ms: o.LatencyMs = None,
    connection_mb_per_s: o.ConnectionMbPerS = None,
    dataset: o.DatasetName = None,
    connections: Annotated[
        int, typer.Option(help="With --remote or --endpoint-url: the connections of the 'N connections' figures.")
    ] = 16,
) -> None:
    """Measure this machine's ceilings: storage and page-cache read bandwidth, host-to-device, device copies;
    with --remote, object storage's: GETs/s and MB/s with one connection and with N."""
    if remote is not None or endpoint_url is not None:
        _remote_limits(data_dir, dataset, results, remote, endpoint_url, latency_ms, connection_mb_per_s, connections)
        return
    if latency_ms is not None or connection_mb_per_s is not None or dataset is not None:
        raise IobenchError("--latency-ms, --connection-mb-per-s and --dataset go with --remote or --endpoint-url")
    from iobench.report.tables import limits_table
    from iobench.run.limits_session import machine_limits

    events = ConsoleEvents(limits_message=f"measuring in {data_dir} ...")
    limits, path = machine_limits(data_dir, device, results, probe_size, read_limit, keep_best, events)
    out.print(limits_table(limits))
    read = limits.probe_file if limits.probe_file.startswith("/") else "a fresh probe file"
    out.print(f"read {read} ({limits.probe_bytes / 2**20:,.0f} MiB)", highlight=False, soft_wrap=True, markup=False)
    out.print(f"stored in {path}", highlight=False, soft_wrap=True, markup=False)


def _remote_limits(
    data_dir: Path,
    dataset: str | None,
    results: Path,
    remote: str | None,
    endpoint_url: str | None,
    latency_ms: float | None,
    connection_mb_per_s: float | None,
    connections: int,
) -> None:
    from iobench.report.tables import remote_limits_table
    from iobench.run.limits_session import store_limits

    limits, path = store_limits(
        data_dir, dataset, results, remote, endpoint_url, latency_ms, connection_mb_per_s, connections, say
    )
    out.print(remote_limits_table(limits))
    if limits.short_of_profile:
        say(
            f"the profile asks {limits.profile_asks_mb_per_s:,.0f} MB/s of {limits.connections} connections; this "
            f"machine's emulator delivered {limits.shaped.mb_per_s_n:,.0f}: runs with that many requests in flight "
            "meet the emulator's limit, not the profile's"
        )
    out.print(
        f"read {limits.probe_object} ({limits.probe_bytes / 2**20:,.1f} MiB); stored in {path}",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


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

    from iobench.plan.resolve import device_of
    from iobench.run.doctor import examine

    if not 0 <= idle_seconds <= MAX_IDLE_SECONDS:  # also refuses nan
        raise IobenchError(f"--idle-seconds must be 0..{MAX_IDLE_SECONDS:g}, got {idle_seconds:g}")
    if not data_dir.is_dir():  # a mistyped folder is named, not created
        raise IobenchError(f"--data-dir {data_dir}: no such folder")
    target = device_of(device)
    if idle_seconds > 0:
        say(f"checking; this leaves a file idle for {idle_seconds:g} s (--idle-seconds 0 skips that) ...")
    findings = examine(data_dir, target, idle_seconds)
    table = Table(title=f"iobench doctor: {data_dir} on {target}")
    for col in ("check", "result", "what it means"):
        table.add_column(col)
    for f in findings:
        table.add_row(f.check, f.status.value, f.detail)
    out.print(table)
