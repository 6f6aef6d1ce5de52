"""`checkpoint`: how fast each library saves and restores a training state on this machine, cold and warm, durable,
with its peak memory, and what survives a kill."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from iobench.cli.app import app
from iobench.cli.console import out, say
from iobench.errors import IobenchError

# checkpoint's options, declared beside it (no other command takes them)
Params = Annotated[
    str,
    typer.Option(
        help="Parameters of the model; the state is 14 bytes a parameter (bf16 weights, "
        "fp32 master weights and Adam moments): 2.5e8 is 3.5 GB."
    ),
]
Layout = Annotated[
    str, typer.Option(help="llama: Llama-like layer shapes; small: the same bytes as tensors of 4,096 parameters.")
]
Source = Annotated[
    Optional[Path],  # noqa: UP045 - typer reads the annotation at runtime
    typer.Option(
        "--from",
        help="Your model's weights instead of generated ones: a "
        "safetensors file or a torch state dict (.pt, .pth, .bin, read with "
        "weights_only=True), in their own dtypes, with fp32 master weights and "
        "Adam moments beside them (--params and --kill-params then come from "
        "it).",
    ),
]
Libraries = Annotated[
    str,
    typer.Option(
        help="Comma list of torch, torch-mmap, safetensors, dcp (thread_count 1), "
        "dcp-threads (4), dcp-async (async_save: timed until it returns, until "
        "done and until durable), tensordict, raw (one write and fsync, one "
        "O_DIRECT read in 8 MiB pieces on 4 threads: a reference), or all."
    ),
]
Directory = Annotated[
    Path,
    typer.Option("--dir", help="Where the checkpoints are written (in a folder of iobench's own, removed at the end)."),
]
Cache = Annotated[str, typer.Option(help="Restores: warm, cold (the files evicted first) or warm,cold.")]
Device = Annotated[
    str,
    typer.Option(
        help="Where restores put the state: cpu (host memory) or cuda[:N] (copied into a "
        "state on the device made before the clock, as load_state_dict does; timed "
        "until the device is done)."
    ),
]
Nproc = Annotated[
    int,
    typer.Option(
        min=1,
        help="Processes that save and restore together under torchrun (gloo), each "
        "holding the state (data parallel), for dcp, dcp-threads and dcp-async "
        "(DCP splits the writes among them); the slowest rank's seconds count. "
        "The other libraries run in one process.",
    ),
]
Trials = Annotated[int, typer.Option(min=1, help="Rounds: each library's save and restores, in turn.")]
KillTest = Annotated[
    int,
    typer.Option(
        min=0,
        help="Also kill a save of step N+1 over step N this many times per "
        "library at random moments, then restore and count.",
    ),
]
KillParams = Annotated[str, typer.Option(help="The kill test's state size (parameters).")]
Results = Annotated[Path, typer.Option(help="Records, one JSON line each.")]


@app.command("checkpoint")
def checkpoint_cmd(
    params: Params = "2.5e7",
    layout: Layout = "llama",
    source: Source = None,
    libraries: Libraries = "all",
    directory: Directory = Path("checkpoints"),
    cache: Cache = "warm,cold",
    device: Device = "cpu",
    nproc: Nproc = 1,
    trials: Trials = 3,
    kill_test: KillTest = 0,
    kill_params: KillParams = "2e6",
    results: Results = Path("results/checkpoints.jsonl"),
) -> None:  # fmt: skip
    """Save and restore a model's training state with each library as its documentation does, every trial in a
    fresh process: seconds until the call returns and until durable (fsync), restores warm and cold, GB/s, peak
    memory, bytes on disk, the round trip checked bit for bit; with --kill-test, what a killed save leaves."""
    from iobench.checkpoint.bench import (
        CheckpointJob,
        answer,
        check_directory,
        check_fits,
        parse_libraries,
        record_kills,
        refused_libraries,
        run_checkpoints,
        summary,
    )
    from iobench.checkpoint.bench import (
        kill_test as run_kill_test,
    )
    from iobench.checkpoint.libraries import LIBRARIES
    from iobench.checkpoint.state import StateSpec
    from iobench.results.store import check_writable
    from iobench.units import parse_size

    asked = parse_libraries(libraries)
    names = [n for n in asked if LIBRARIES[n].installed]
    caches = tuple(c.strip() for c in cache.split(",") if c.strip())
    if not caches or any(c not in ("warm", "cold") for c in caches):
        raise IobenchError(f"--cache: warm, cold or warm,cold, got {cache!r}")
    try:
        if source is not None:
            spec = kill_spec = StateSpec.of_file(source)
        else:
            spec = StateSpec(parse_size(params), layout)
            kill_spec = StateSpec(parse_size(kill_params), layout)
    except ValueError as exc:
        raise IobenchError(str(exc)) from None
    check_writable(results)
    check_directory(directory)
    device = _device(device, spec.state_bytes)
    check_fits(spec, [LIBRARIES[n] for n in names], nproc)  # a refusal is its one line, before anything else is said
    if kill_test:
        check_fits(kill_spec, [LIBRARIES[n] for n in names if LIBRARIES[n].own_save], what="--kill-params")
    for line in refused_libraries(asked):
        say(line)
    say(f"checkpoint: a {spec.state_bytes / 1e9:.2f} GB state ({spec.params:,} parameters, {spec.layout}), "
        f"{', '.join(names)}, {trials} round(s) under {directory}")  # fmt: skip
    if nproc > 1 and device != "cpu":
        raise IobenchError("checkpoint --nproc runs its ranks on the host (gloo); leave out --device")
    job = CheckpointJob(spec, tuple(names), directory, caches, trials, results, device, nproc)
    rows = summary(run_checkpoints(job, say))
    _print_table(rows, caches)
    kills = None
    if kill_test:
        kills = {n: run_kill_test(kill_spec, n, kill_test, directory) for n in names if LIBRARIES[n].own_save}
        for name, counts in kills.items():
            record_kills(results, kill_spec, name, counts)
        _print_kills(kills, kill_test, kill_spec)
    line = answer(rows, kills)
    out.print(f"{len(rows)} libraries measured; records in {results}", highlight=False, soft_wrap=True)
    if line:
        out.print(line, highlight=False, soft_wrap=True)


def _device(text: str, state_bytes: int) -> str:
    """cpu, or a CUDA device that exists here and has room for the state; one line otherwise."""
    if text == "cpu":
        return text
    if text != "cuda" and not text.startswith("cuda:"):
        raise IobenchError(f"--device: cpu, cuda or cuda:N, got {text!r}")
    import torch

    if not torch.cuda.is_available():
        raise IobenchError(f"checkpoint --device {text}: no CUDA device here (torch {torch.__version__})")
    free, _ = torch.cuda.mem_get_info(torch.device(text))
    if state_bytes * 1.1 > free:
        raise IobenchError(f"checkpoint --device {text}: a {state_bytes / 2**30:.2f} GiB state and "
                           f"{free / 2**30:.1f} GiB free on the device; give a smaller --params")  # fmt: skip
    return str(torch.device(text))


def _print_table(rows: list[dict], caches: tuple[str, ...]) -> None:
    from rich.table import Table

    table = Table(title="checkpoint: medians of the rounds")
    columns = ["library", "save s", "done s", "durable s", *(f"restore {c} s" for c in caches), "GB/s cold",
               "restore peak GB", "on disk GB", "exact"]  # fmt: skip
    for col in columns:
        table.add_column(col, justify="left" if col == "library" else "right")
    for r in rows:
        cold = r["bytes_on_disk"] / r["cold_s"] / 1e9 if r.get("cold_s") else None
        cells = [r["library"] + (" (reference)" if r["ceiling"] else ""), _s(r["save_s"]), _s(r.get("done_s")),
                 _s(r["durable_s"]),
                 *(_s(r[f"{c}_s"]) for c in caches), f"{cold:.2f}" if cold else "-",
                 f"{r['restore_peak'] / 1e9:.2f}" if r["restore_peak"] else "-", f"{r['bytes_on_disk'] / 1e9:.2f}",
                 "-" if r["exact"] is None else "yes" if r["exact"] else "NO"]  # fmt: skip
        table.add_row(*cells)
    out.print(table)


def _print_kills(kills: dict[str, dict[str, int]], n: int, spec: object) -> None:
    from rich.table import Table

    from iobench.results.checkpoint_record import KILL_OUTCOMES

    table = Table(title=f"a save of step N+1 over step N killed {n} times (state {spec.state_bytes / 1e6:.0f} MB)")
    table.add_column("library")
    for outcome in KILL_OUTCOMES:
        table.add_column(outcome, justify="right")
    for name, counts in kills.items():
        table.add_row(name, *(str(counts[o]) for o in KILL_OUTCOMES))
    out.print(table)


def _s(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"
