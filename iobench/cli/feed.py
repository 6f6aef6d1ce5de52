"""`feed`: how many accelerators of a workload this storage keeps busy (MLPerf Storage's question) over the user's
format and loader. The command parses and prints; `iobench.sessions.feed` measures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from iobench.cli.app import app
from iobench.cli.console import ConsoleEvents, out
from iobench.cli.options import DataDir, DatasetName, EndpointUrl, Quiet, Remote, Results
from iobench.errors import IobenchError
from iobench.feed import defaults as default
from iobench.feed.defaults import (
    MAX_ACCELERATORS,
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_SAMPLE_BYTES,
    MAX_SIZE,
    MAX_STEP_MS,
    MAX_WHAT_IF,
    MAX_WORKERS,
)
from iobench.feed.workloads import ACCELERATORS, CUSTOM, NAMES, WORKLOADS
from iobench.plan.place import network_of
from iobench.results.feed_record import RULES
from iobench.units import count_of, parse_size

OptInt = Optional[int]  # noqa: UP045 - typer reads the annotation at runtime
OptFloat = Optional[float]  # noqa: UP045
OptStr = Optional[str]  # noqa: UP045


def _workloads_help() -> str:
    pairs = ", ".join(
        f"{w.key} ({w.sample_bytes / 1e6:,.2f} MB a sample, batch {w.batch_size}, {w.compute_s * 1000:g} ms)"
        for w in WORKLOADS.values()
    )
    return (
        f"{', '.join(NAMES)} or {CUSTOM} (--step-ms, --batch-size, --sample-bytes or your --dataset). "
        f"Published: {pairs}."
    )


CUSTOM_AU = 0.90


CheckRules = Annotated[
    Optional[Path],  # noqa: UP045 - typer reads the annotation at runtime
    typer.Option(
        "--check-rules",
        metavar="RESULTS",
        help="Measure nothing: say, for each feed answer stored in RESULTS, whether it would stand as a CLOSED "
        "MLPerf Storage result and, rule by rule, what it would take.",
    ),
]


@app.command("feed")
def feed_cmd(
    workload: Annotated[str, typer.Option(help=_workloads_help())] = "resnet50",
    accelerator: Annotated[str, typer.Option(help=f"One of {', '.join(ACCELERATORS)}.")] = "h100",
    format: Annotated[str, typer.Option("--format", help="The format the ranks read.")] = "npy",
    loader: Annotated[str, typer.Option(help="The loader each rank reads with (as `run --loader`).")] = "dataloader",
    size: Annotated[
        OptStr,
        typer.Option(
            help="Samples of the dataset feed makes, written as prepare's --size (2e3, 20000, 20k; default: four "
            "batches or more, at most about 4 GB and at most 20,000 samples or 32 batches, whichever is more)."
        ),
    ] = None,
    data_dir: DataDir = Path("data"),
    dataset: DatasetName = None,
    step_ms: Annotated[OptFloat, typer.Option(help="custom: one batch's compute time.")] = None,
    batch_size: Annotated[OptInt, typer.Option(help="custom: the batch (a named workload has its own).")] = None,
    sample_bytes: Annotated[OptInt, typer.Option(help="custom without --dataset: a sample's bytes.")] = None,
    au: Annotated[
        OptFloat,
        typer.Option(help="custom: the utilisation every rank must keep (default 0.90; a named workload has its own)."),
    ] = None,
    num_workers: Annotated[OptInt, typer.Option(help="Each rank's workers (default: DLIO's read threads).")] = None,
    epochs: Annotated[int, typer.Option(help="Epochs measured at each count, after a warm-up epoch.")] = default.EPOCHS,
    cache: Annotated[
        OptStr, typer.Option(help="cold (evicted before each epoch, root) or warm; default: cold where iobench can.")
    ] = None,
    max_accelerators: Annotated[int, typer.Option(help="The most ranks tried.")] = default.MOST,
    what_if: Annotated[
        OptStr,
        typer.Option(
            help="Comma list of step times in ms (a faster accelerator's compute a batch): N searched again with "
            "each, measured, after the workload's own."
        ),
    ] = None,
    rules: Annotated[
        str,
        typer.Option(
            help="How AU is counted to rank the counts: feed (whole epochs, every rank in every epoch: the training "
            "job's) or dlio (each epoch's first step left out, ranks and epochs averaged: MLPerf Storage's number). "
            "Both are recorded; the answer says the other's N where it differs."
        ),
    ] = RULES[0],
    remote: Remote = None,
    endpoint_url: EndpointUrl = None,
    results: Results = default.RESULTS,
    check_rules: CheckRules = None,
    quiet: Quiet = False,
) -> None:
    """How many emulated accelerators this storage keeps at the workload's utilisation: N ranks each read their shard
    with the workload's batch and step (a sleep of its compute time), N searched by doubling then halving; the
    answer names N, the AU at N and N+1, what an accelerator needs and gets, and the bound (storage, CPU or the
    loader's hand-over)."""
    from iobench.sessions.feed import FeedRequest, feed_session

    if check_rules is not None:
        return _check_rules(check_rules)
    chosen = _workload(workload, accelerator, step_ms, batch_size, sample_bytes, au, dataset, num_workers)
    if cache not in (None, "warm", "cold"):
        raise IobenchError(f"--cache: warm or cold, got {cache!r}")
    request = FeedRequest(
        workload=chosen,
        format=format,
        loader=loader,
        data_dir=data_dir,
        results=results,
        dataset=dataset,
        size=_bounded(parse_size(size) if size is not None else None, "--size", 1, MAX_SIZE),
        epochs=_bounded(epochs, "--epochs", 1, MAX_EPOCHS),
        cache=cache,
        most=_bounded(max_accelerators, "--max-accelerators", 1, MAX_ACCELERATORS),
        num_workers=_bounded(num_workers, "--num-workers", 0, MAX_WORKERS),
        what_if=_steps(what_if),
        rules=rules.strip().lower(),
        remote=network_of(remote, endpoint_url),
        endpoint_url=endpoint_url,
    )
    outcome = feed_session(request, ConsoleEvents(quiet))
    _print(outcome, results)


def _steps(text: str | None) -> tuple[float, ...]:
    """--what-if's step times: each above 0 ms and at most an hour, at most MAX_WHAT_IF of them."""
    from iobench.cli.run import ms_list

    if text is None:
        return ()
    try:
        steps = tuple(ms_list(text))
    except ValueError:
        steps = ()
    if not steps or len(steps) > MAX_WHAT_IF or not all(0 < x <= MAX_STEP_MS for x in steps):
        raise IobenchError(
            f"--what-if: 1 to {MAX_WHAT_IF} step times in ms, each above 0 and at most an hour; got {text!r}"
        )
    return steps


def _bounded(value: int | None, option: str, low: int, high: int) -> int | None:
    """An optional count checked as every command's (`iobench.units.count_of`); None stays None."""
    return None if value is None else count_of(value, option, low, high)


def _workload(
    name: str,
    accelerator: str,
    step_ms: float | None,
    batch_size: int | None,
    sample_bytes: int | None,
    au: float | None,
    dataset: str | None,
    num_workers: int | None,
):  # noqa: ANN202 - a Workload (imported here: --help imports nothing heavy)
    from iobench.choices import did_you_mean
    from iobench.feed.workloads import custom, workload_of

    name, accelerator = name.strip().lower(), accelerator.strip().lower()
    if name == CUSTOM:
        au = CUSTOM_AU if au is None else au
        if step_ms is None or batch_size is None or (sample_bytes is None and dataset is None):
            raise IobenchError("--workload custom needs --step-ms, --batch-size and --sample-bytes (or --dataset)")
        if not (0 < step_ms <= MAX_STEP_MS) or not (0 < au <= 1):
            raise IobenchError("--step-ms: above 0 and at most an hour; --au: above 0 and at most 1")
        _bounded(batch_size, "--batch-size", 1, MAX_BATCH)
        _bounded(sample_bytes, "--sample-bytes", 1, MAX_SAMPLE_BYTES)
        return custom(sample_bytes or 1, batch_size, step_ms, au, num_workers if num_workers is not None else 4)
    if step_ms is not None or batch_size is not None or sample_bytes is not None or au is not None:
        raise IobenchError(
            f"--step-ms, --batch-size, --sample-bytes and --au go with --workload custom, not {name} (it has its own)"
        )
    found = workload_of(name, accelerator)
    if found is None:
        have = ", ".join(WORKLOADS)
        hint = (
            did_you_mean(name, [*NAMES, CUSTOM]) if name not in NAMES else did_you_mean(accelerator, list(ACCELERATORS))
        )
        raise IobenchError(
            f"--workload {name} --accelerator {accelerator}: no published workload is that pair{hint} ({have})"
        )
    return found


def _check_rules(path: Path) -> None:
    """Each stored feed answer's rules, rule by rule (`iobench.judge.rules`)."""
    from rich.table import Table

    from iobench.feed.workloads import closed_of
    from iobench.judge.rules import feed_rules
    from iobench.report.feed import load_feed, title_of

    loaded = load_feed(path)
    if not loaded.records:
        raise IobenchError(f"{path}: no feed records" + (f" ({loaded.skipped[0]})" if loaded.skipped else ""))
    for record in loaded.records:
        table = Table(title=f"{title_of(record)} ({record.timestamp})")
        for col in ("MLPerf Storage rule (CLOSED)", "kept", "what was found, and what it would take"):
            table.add_column(col)
        for check in feed_rules(record, closed_of(record.workload)):
            table.add_row(check.rule, "yes" if check.holds else "no", check.said)
        out.print(table)
    for reason in loaded.skipped:
        out.print(f"skipped: {reason}", highlight=False, soft_wrap=True, markup=False)


def _print(outcome, results: Path) -> None:  # noqa: ANN001 - a FeedOutcome
    from rich.table import Table

    from iobench.report.feed import count_cells, count_head, title_of

    if outcome.record is None:
        return
    table = Table(title=title_of(outcome.record))
    for col in count_head(outcome.record):
        table.add_column(col, justify="right")
    for point in outcome.record.points:
        table.add_row(*count_cells(point, outcome.record))
    out.print(table)
    for line in (outcome.answer.line if outcome.answer is not None else None, outcome.rules):
        if line:  # the judgement's answer, and MLPerf's rules against it
            out.print(line, highlight=False, soft_wrap=True, markup=False)
    from iobench.judge.feed import what_if_line

    for other in outcome.what_if:
        out.print(what_if_line(outcome.record, other), highlight=False, soft_wrap=True, markup=False)
    from iobench.results.feed_record import runs_path

    said = f"records: {results} (`iobench report` or `compare` it); each count's run: {runs_path(results)}"
    out.print(said, highlight=False, soft_wrap=True, markup=False)
