"""`checkpoint`: how fast each library saves and restores a model's training state on this machine, cold and warm,
durable, in place or safely, locally or on object storage, with its peak memory, and what survives a kill. The
command parses and prints; `iobench.sessions.checkpoint` measures."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from iobench.checkpoint import defaults as default
from iobench.checkpoint.defaults import MAX_KILLS, MAX_ROUNDS
from iobench.checkpoint.libraries import libraries_help
from iobench.cli.app import app
from iobench.cli.bars import CheckpointEvents
from iobench.cli.console import out
from iobench.cli.option_groups import takes_group, takes_run_options
from iobench.cli.options import (
    CacheList,
    ConnectionMbPerS,
    Device,
    EndpointUrl,
    LatencyMs,
    Nproc,
    Quiet,
    Remote,
    Results,
)
from iobench.errors import IobenchError
from iobench.plan.run_options import CHECKPOINT

# checkpoint's own options (run takes none of them); the shared ones come from iobench.cli.options
Params = Annotated[
    str,
    typer.Option(
        help="Parameters of the model, or a comma list of sizes: counts (2.5e7, 100M) or the state's bytes (256MiB, "
        "1GiB, 4GB); the state is 14 bytes a parameter (bf16 weights, fp32 master weights and Adam moments): 2.5e8 "
        "is 3.5 GB."
    ),
]
Layout = Annotated[
    str, typer.Option(help="llama: Llama-like layer shapes; small: the same bytes as tensors of 4,096 parameters.")
]
Source = Annotated[
    Optional[Path],  # noqa: UP045 - typer reads the annotation at runtime
    typer.Option(
        "--from",
        help="Your model's weights instead of generated ones: a safetensors file or a torch state dict (.pt, .pth, "
        ".bin, read with weights_only=True), in their own dtypes, with fp32 master weights and Adam moments beside "
        "them (--params then comes from it; the kill test keeps --kill-params: what it tests is a save's commit).",
    ),
]
Directory = Annotated[
    Path,
    typer.Option(
        "--dir",
        help="Where the checkpoints are written (in a folder of iobench's own, removed at the end); "
        "the kill test's too.",
    ),
]
Rounds = Annotated[
    int,
    typer.Option(
        "--rounds",
        "--trials",
        min=1,
        max=MAX_ROUNDS,
        help="Rounds: each library's saves and restores, in turn (--trials: its old name, still taken).",
    ),
]
SaveMode = Annotated[
    str,
    typer.Option(
        help="inplace (each save over the last, as every library does given one path), safe (step N+1 beside step "
        "N, fsynced, then a `latest` pointer swapped and its folder fsynced: a kill never loses step N), keep:K (as "
        "safe, the last K kept, the oldest removed after the clock, as a job's save_top_k: each save new files beside "
        "the K kept, the timed one the (K+1)th), or a comma list: each timed."
    ),
]
KillTest = Annotated[
    int,
    typer.Option(
        min=0,
        max=MAX_KILLS,
        help="Also kill a save of step N+1 over step N this many times per library and save mode at random moments, "
        "then restore and count; the answer leaves out what a kill lost.",
    ),
]
TrainingStep = Annotated[
    str,
    typer.Option(
        "--step",
        help="A training loop beside each steady save: none, sleep:MS, mlp (a small training step on the device) or "
        "module:function (yours, called with a batch of 256x1024 features and labels): the time the save blocks it, "
        "an asynchronous save's background time, and the loop's steps/s while it runs against without a save.",
    ),
]
Restart = Annotated[
    bool,
    typer.Option(
        "--restart",
        help="Each round also restarts as a preempted job does, in a fresh process, warm and cold: its start and "
        "imports, the state allocated, the checkpoint restored into it, the first training step (--step, or an "
        "optimizer step over the state), each part timed.",
    ),
]
KillParams = Annotated[str, typer.Option(help="The kill test's state size (parameters, or bytes: 1GiB).")]
Tune = Annotated[
    bool,
    typer.Option(
        "--tune",
        help="Search the libraries and settings iobench can hand over as code (torch, safetensors, DCP's thread "
        f"count and async save, a TensorDict; save modes {','.join(default.TUNE_SAVE_MODES)} unless --save-mode "
        f"names others), each kill-tested ({default.TUNE_KILLS} kills unless --kill-test says more), within "
        "--budget-minutes; print a save and a restore function for the fastest that never lost a checkpoint, and "
        "run them once in a fresh process to check the figure.",
    ),
]
BudgetMinutes = Annotated[
    float,
    typer.Option(help="--tune's time: its rounds are cut to fit, or it refuses in one line if one round cannot."),
]


Libraries = Annotated[str, typer.Option(help=libraries_help())]
Workload = Annotated[
    Optional[str],  # noqa: UP045 - typer reads the annotation at runtime
    typer.Option(
        help="One of MLPerf Storage's checkpointing workloads instead of the libraries: llama3-8b, llama3-70b, "
        "llama3-405b or llama3-1t, written and read as DLIO does (each rank's shard of the model's tensor, pipeline "
        "and ZeRO layout, torch.save and fsync; read back cold), --nproc ranks of its layout (MLPerf's subset "
        "mode; 1 unless given), --rounds checkpoints (10 unless given), --scale of its layers.",
    ),
]
Scale = Annotated[
    float,
    typer.Option(
        help="With --workload: the share of the model's transformer layers written (the embedding and the "
        "head stay whole), so that a checkpoint fits this machine: 0.03 keeps 1 of llama3-8b's 32."
    ),
]
SAVE_MODES_TEXT = ",".join(default.SAVE_MODES)
# what --workload does not take: it writes DLIO's layout, not a library's state
WORKLOAD_REFUSES = ("params", "layout", "source", "libraries", "cache", "save_mode", "kill_test", "kill_params", "step")
WORKLOAD_REFUSES += ("restart", "tune", "budget_minutes", "remote", "endpoint_url", "latency_ms", "connection_mb_per_s")
WORKLOAD_REFUSES += ("device",)


@dataclass(frozen=True)
class CheckpointAsked:
    """checkpoint's own options, declared once: typer reads each field as an option (`takes_group`), and the
    command gets them as this value."""

    params: Params = default.PARAMS
    layout: Layout = default.LAYOUT
    source: Source = None
    libraries: Libraries = default.LIBRARIES
    cache: CacheList = None
    nproc: Nproc = None
    rounds: Rounds = default.ROUNDS
    save_mode: SaveMode = SAVE_MODES_TEXT
    kill_test: KillTest = default.KILL_TEST
    kill_params: KillParams = default.KILL_PARAMS
    step: TrainingStep = "none"
    restart: Restart = False
    tune: Tune = False
    budget_minutes: BudgetMinutes = default.TUNE_BUDGET_MINUTES
    workload: Workload = None
    scale: Scale = 1.0


@app.command("checkpoint")
@takes_run_options(CHECKPOINT, after="kill_params")
@takes_group(CheckpointAsked, None, "asked", first=True)
def checkpoint_cmd(
    ctx: typer.Context,
    directory: Directory = default.DIRECTORY,
    device: Device = "auto",
    results: Results = default.RESULTS,
    remote: Remote = None,
    endpoint_url: EndpointUrl = None,
    latency_ms: LatencyMs = None,
    connection_mb_per_s: ConnectionMbPerS = None,
    quiet: Quiet = False,
    *,
    asked: CheckpointAsked,  # first
    run_options: Mapping[str, Any],  # after --kill-params
) -> None:
    """Save and restore a model's training state with each library as its documentation does, every trial in a
    fresh process at the same torch threads: the first save and the steady one until returned, done and durable,
    restores warm and cold, GB/s, peak memory, bytes stored, the round trip checked bit for bit; with --kill-test,
    what a killed save leaves; the answer rests on it."""
    from iobench.plan.place import PlaceValues, place_of
    from iobench.sessions.checkpoint import checkpoint_request, checkpoint_session

    if asked.workload is not None:
        _workload(ctx, asked, directory, results, quiet)
        return
    asked = _tune_defaults(ctx, asked)
    place = PlaceValues(
        data_dir=directory,
        device=device,
        remote=remote,
        endpoint_url=endpoint_url,
        latency_ms=latency_ms,
        connection_mb_per_s=connection_mb_per_s,
    )
    own = {k: v for k, v in asdict(asked).items() if k not in ("workload", "scale")}
    request = checkpoint_request(place_of(place, results), torch_threads=run_options["torch_threads"], **own)
    outcome = checkpoint_session(request, CheckpointEvents(quiet))
    _print_outcome(outcome, request.results)
    if outcome.tuned is not None:
        _print_tuned(outcome.tuned)


def _given(ctx: typer.Context, name: str) -> bool:
    """The option was typed (typer's own click or click's: the source compared by name)."""
    return getattr(ctx.get_parameter_source(name), "name", None) != "DEFAULT"


def _workload(ctx: typer.Context, asked: CheckpointAsked, directory: Path, results: Path, quiet: bool) -> None:
    """--workload: MLPerf's checkpointing workload, its answer and its rules line (`sessions.checkpoint_workload`)."""
    from iobench.cli.console import ConsoleEvents
    from iobench.sessions.checkpoint_workload import workload_request, workload_session

    others = [n for n in WORKLOAD_REFUSES if _given(ctx, n)]
    if others:
        flags = ", ".join("--" + n.replace("_", "-") for n in others)
        raise IobenchError(f"--workload writes DLIO's layout with torch.save: drop {flags}")
    request = workload_request(
        workload=asked.workload or "",
        scale=asked.scale,
        ranks=asked.nproc,
        checkpoints=asked.rounds if _given(ctx, "rounds") else None,
        directory=directory,
        results=results if _given(ctx, "results") else default.WORKLOAD_RESULTS,
    )
    outcome = workload_session(request, ConsoleEvents(quiet))
    for line in (outcome.answer, outcome.rules, f"record in {request.results}"):
        out.print(line, highlight=False, soft_wrap=True, markup=False)


def _tune_defaults(ctx: typer.Context, asked: CheckpointAsked) -> CheckpointAsked:
    """--budget-minutes only with --tune; --tune's save modes a job's patterns (keep:3 among them) unless named."""

    if not _given(ctx, "workload") and _given(ctx, "scale"):
        raise IobenchError("--scale goes with --workload")
    if _given(ctx, "budget_minutes") and not asked.tune:
        raise IobenchError("--budget-minutes goes with --tune")
    if asked.tune and not _given(ctx, "save_mode"):
        return replace(asked, save_mode=",".join(default.TUNE_SAVE_MODES))
    return asked


def _print_outcome(outcome: Any, results: Path) -> None:
    from iobench.report.checkpoints import (
        beside_cells,
        beside_head,
        by_size,
        kill_cells,
        kill_head,
        restart_head,
        restart_rows,
        size_cells,
        size_head,
        summary_cells,
        summary_head,
    )
    from iobench.results.checkpoint_summary import kill_counts

    for spec, rows in outcome.rows.items():
        caches = outcome.caches
        title = f"checkpoint: {spec.state_bytes / 1e9:.2f} GB state, medians of the rounds"
        _print_table(title, summary_head(caches), [summary_cells(r, caches) for r in rows])
        if stepped := [r for r in rows if r.step != "none"]:
            _print_table("the training loop beside each steady save", beside_head(), [beside_cells(r) for r in stepped])
    if len(outcome.rows) > 1:
        rows = {spec.state_bytes: r for spec, r in outcome.rows.items()}
        sizes = sorted(rows)
        _print_table(
            "seconds and GB/s against size",
            size_head(sizes),
            [size_cells(k, v, sizes) for k, v in by_size(rows).items()],
        )
    if restarts := [t for t in outcome.trials if t.op == "restart"]:
        _print_table("restart: a fresh process to its first training step", restart_head(), restart_rows(restarts))
    if outcome.kills:
        kills = kill_counts(outcome.kills)
        title = f"a save of step N+1 over step N killed {outcome.kills[0].kills} times"
        _print_table(title, kill_head(), [kill_cells(k, c) for k, c in kills.items()])
    out.print(f"{len(outcome.trials)} trials measured; records in {results}", highlight=False, soft_wrap=True)
    for line in (outcome.answer, outcome.rules):  # the judgement's answer, and MLPerf's rules against it
        if line:
            out.print(line, highlight=False, soft_wrap=True, markup=False)


def _print_tuned(tuned: Any) -> None:
    """--tune's code and its check in a fresh process, judged by `iobench.judge.paste`."""
    from iobench.cli.render import print_script
    from iobench.judge.paste import verdict_words

    if tuned.script is None:
        out.print(f"tune: no code: {tuned.why}", highlight=False, soft_wrap=True, markup=False)
        return
    print_script(tuned.script, tuned.text)
    check = tuned.check
    if check is None:
        return
    if check.figure is None:
        out.print(f"the pasted code could not be checked: {check.said}", highlight=False, markup=False)
        return
    saved = verdict_words(tuned.verdict, "it does not save as tune measured")
    line = (
        f"the pasted code, run in a fresh process: the steady durable save in {check.figure:.3f} s against tune's "
        f"{tuned.seconds:.3f} s, {tuned.speed_ratio:.2f}x its speed ({saved})"
    )
    if tuned.restore_ratio is not None:
        restored = verdict_words(tuned.restore_verdict, "it does not restore as tune measured")
        line += (
            f"; the warm restore into a state already in memory in {tuned.script_restore:.3f} s against tune's "
            f"{tuned.restore_seconds:.3f} s, {tuned.restore_ratio:.2f}x its speed ({restored})"
        )
    out.print(line, highlight=False, soft_wrap=True, markup=False)


def _print_table(title: str, head: list[str], rows: list[list[str]]) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title))
    for k, col in enumerate(head):
        table.add_column(col, justify="left" if k < 2 else "right")
    for cells in rows:
        table.add_row(*(escape(c) for c in cells))
    out.print(table)
