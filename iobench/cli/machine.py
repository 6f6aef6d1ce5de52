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
    from iobench.loaders.device import resolve_device
    from iobench.measuring.machine_ceilings import best_of, load_limits, measure_limits, save_limits
    from iobench.report.tables import limits_table
    from iobench.results.store import check_writable, limits_path
    from iobench.storage.local.confine import check_read_limit
    from iobench.units import parse_bytes

    probe = parse_bytes(probe_size)
    check_read_limit(read_limit)
    target = resolve_device(device)
    check_writable(limits_path(results), records=False)
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


def _remote_limits(data_dir: Path, dataset: str | None, results: Path, remote: str | None, endpoint_url: str | None,
                   latency_ms: float | None, connection_mb_per_s: float | None, connections: int) -> None:  # fmt: skip
    from iobench.data.manifest import find_run_dataset
    from iobench.measuring.object_store_ceilings import find_probes, measure_remote_limits, save_remote_limits
    from iobench.report.tables import remote_limits_table
    from iobench.results.store import check_writable, remote_limits_path
    from iobench.storage.remote.profiles import profile

    if remote is not None and endpoint_url is not None:
        raise IobenchError("--endpoint-url measures a store as it is: not with --remote (iobench's own)")
    if endpoint_url is not None and (latency_ms is not None or connection_mb_per_s is not None):
        raise IobenchError("--latency-ms and --connection-mb-per-s shape --remote: not with --endpoint-url")
    chosen = profile(remote, latency_ms, connection_mb_per_s) if remote is not None else None
    check_writable(remote_limits_path(results), records=False)
    folder = find_run_dataset(data_dir, dataset)
    if folder is None:
        raise IobenchError(f"no prepared dataset in {data_dir}; run `iobench prepare` first")
    try:
        limits = measure_remote_limits(find_probes(folder), chosen, endpoint_url, connections, say)
    except OSError as exc:  # a refused key, a missing bucket, a store gone mid-measurement: obstore's, worded
        raise IobenchError(f"limits: {exc}") from None
    path = save_remote_limits(results, limits)
    out.print(remote_limits_table(limits))
    if limits.short_of_profile:
        say(f"the profile asks {limits.profile_asks_mb_per_s:,.0f} MB/s of {limits.connections} connections; this "
            f"machine's emulator delivered {limits.shaped.mb_per_s_n:,.0f}: runs with that many requests in flight "
            "meet the emulator's limit, not the profile's")  # fmt: skip
    out.print(f"read {limits.probe_object} ({limits.probe_bytes / 2**20:,.1f} MiB); stored in {path}",
              highlight=False, soft_wrap=True, markup=False)  # fmt: skip


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
