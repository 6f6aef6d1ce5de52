"""`limits` and `doctor`: this machine's ceilings and what the numbers rest on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.console import ConsoleEvents, out, say
from iobench.results.limits import MachineLimits, RemoteLimits


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
    from iobench.plan.place import PlaceValues, place_of
    from iobench.sessions.limits import LimitsRequest, limits_session

    place = place_of(
        PlaceValues(
            data_dir=data_dir,
            dataset=dataset,
            device=device,
            remote=remote,
            endpoint_url=endpoint_url,
            latency_ms=latency_ms,
            connection_mb_per_s=connection_mb_per_s,
        ),
        results,
    )
    request = LimitsRequest(
        place=place, probe_size=probe_size, read_limit=read_limit, keep_best=keep_best, connections=connections
    )
    outcome = limits_session(request, ConsoleEvents(limits_message=f"measuring in {data_dir} ..."))
    _print_limits(outcome.limits, outcome.stored)


def _print_limits(limits: MachineLimits | RemoteLimits, path: Path) -> None:
    from iobench.report.tables import limits_table, remote_limits_table

    if isinstance(limits, MachineLimits):
        out.print(limits_table(limits))
        read = limits.probe_file if limits.probe_file.startswith("/") else "a fresh probe file"
        what = f"read {read} ({limits.probe_bytes / 2**20:,.0f} MiB)"
        out.print(what, highlight=False, soft_wrap=True, markup=False)
        out.print(f"stored in {path}", highlight=False, soft_wrap=True, markup=False)
        return
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

    from iobench.sessions.doctor import DoctorRequest, doctor_session

    request = DoctorRequest(data_dir=data_dir, device=device, idle_seconds=idle_seconds)
    outcome = doctor_session(request, ConsoleEvents())
    table = Table(title=f"iobench doctor: {data_dir} on {outcome.device}")
    for col in ("check", "result", "what it means"):
        table.add_column(col)
    for f in outcome.findings:
        table.add_row(f.check, f.status.value, f.detail)
    out.print(table)
