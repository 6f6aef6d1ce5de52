"""Measuring from the command line: a configuration from its values, one run with a progress bar, a
record saved (or rescued), the what-if check. Imported by the commands that measure, when they run."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from iobench.choices import split_list
from iobench.cli.app import ARGV
from iobench.cli.bars import run_progress, standing, time_range
from iobench.cli.console import ConsoleEvents, err, out, say
from iobench.cli.render import print_run
from iobench.errors import IobenchError
from iobench.loaders import LOADERS, LoaderName
from iobench.loaders.device import resolve_device
from iobench.measuring.machine_ceilings import stored_or_measured
from iobench.plan.config import RunConfig, order_of
from iobench.plan.resolve import ResolvedRun, RunTarget, settle_device
from iobench.plan.selection import without_memory_resident
from iobench.report.whatif import error, predict
from iobench.results.ceilings import MachineLimits, RemoteLimits
from iobench.results.record import RunRecord
from iobench.results.store import append_record
from iobench.run.estimates import Estimate
from iobench.run.place import RunPlace
from iobench.run.runner import run
from iobench.run.session import dataset_for_run, launch_torchrun, resolve_all
from iobench.settings import LoaderSettings
from iobench.storage.remote import FuseOptions, RemoteTarget
from iobench.storage.remote.profiles import Profile
from iobench.system.world import joined
from iobench.units import QUICK_SIZE

if TYPE_CHECKING:
    import torch


def step_times(text: str, ranks: bool) -> list[float]:
    if ranks:
        raise IobenchError("--what-if measures its checks in one process; run it without torchrun or --nproc")
    try:
        values = [float(x) for x in split_list(text, "--what-if step time")]
    except ValueError:
        raise IobenchError(f"--what-if takes step times in ms, e.g. 2.5,10; got {text!r}") from None
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise IobenchError(f"--what-if step times must be >= 0 ms, got {text!r}")
    return values


def measure_what_if(
    todo: list[ResolvedRun],
    records: list[RunRecord],
    steps_ms: list[float],
    results: Path,
    limits: MachineLimits | RemoteLimits | None,
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
            measured = run_one(check, quiet, limits, None)
            save(results, measured)
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


def read_options_of(texts: list[str], pairs: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """--format-option of a run, per format: a pipeline's for the (format, loader) pairs read natively, and those
    every loader reads through for the formats read by another loader."""
    from iobench.data.format_options import any_loader_formats, parse_format_options

    own = {ld for _, ld in pairs if LOADERS[LoaderName.parse(ld, "--loader")].own_pipeline}
    natively = tuple(dict.fromkeys(f for f, ld in pairs if ld in own))
    by_index = any_loader_formats(tuple(dict.fromkeys(f for f, ld in pairs if ld not in own)))
    return parse_format_options(texts, natively, True, by_index)


def config_of(
    fmt: str, loader: str, settings: LoaderSettings, *, shuffle: bool, block_size: int,
    read_options: dict[str, dict[str, Any]] | None = None, **kw: Any,
) -> RunConfig:  # fmt: skip
    """A run configuration from command-line values (shared by run and sweep): strings become enums.
    `read_options` (--format-option, per format) apply to the formats' own pipelines (--loader native), and
    those every loader reads through (npy's object-storage client) to any loader."""
    from iobench.data.format_options import settable_fields

    own = (read_options or {}).get(fmt, {})
    if not LOADERS[LoaderName.parse(loader, "--loader")].own_pipeline and own:
        own = {k: v for k, v in own.items() if k in settable_fields(fmt, reading=True, native=False)}
    return RunConfig(
        format=fmt, loader=loader, settings=settings, order=order_of(shuffle, block_size), block_size=block_size,
        format_options=tuple(sorted(own.items())), **kw,
    )  # fmt: skip


def settings_of(params: dict[str, Any]) -> LoaderSettings:
    """The loader settings among a command's values (its options are named as the settings' fields)."""
    return LoaderSettings(**{f.name: params[f.name] for f in fields(LoaderSettings) if f.name in params})


def save(results: Path, record: RunRecord) -> None:
    """Append the record; if that fails after a long measurement, keep it in a new file of iobench's own folder
    (created there, never an existing name or a link) and say where."""
    from iobench.system.private import create_exclusive, owner_tag, state_root

    try:
        append_record(results, record)
    except IobenchError as exc:
        line = (json.dumps(record.to_json(), allow_nan=True) + "\n").encode()
        try:
            rescue = state_root() / f"unsaved-{owner_tag()}-{time.time_ns()}.jsonl"
            create_exclusive(rescue, line)
            say(f"{exc}; the record was saved to {rescue} instead")
        except (IobenchError, OSError):
            say(f"{exc}; the record follows on stderr")
            err.print(line.decode().rstrip(), highlight=False, soft_wrap=True, markup=False)
        raise


def run_one(
    resolved: ResolvedRun,
    quiet: bool,
    limits: MachineLimits | RemoteLimits | None,
    profile_dir: Path | None,
    place: str = "",
) -> RunRecord:
    """One configuration with its own bar; `place` ("configuration 2 of 5, about 3 min left") heads it."""
    c = resolved.config
    label = f"{place}: {c.label}" if place else c.label
    with run_progress(label, c.runs * (c.warmup + c.epochs), quiet) as bar:
        return bar.done(run(resolved, limits, profile_dir, bar))


def measure_run(
    configs: list[RunConfig],
    notes: list[str],
    where: RunPlace,
    *,
    nproc: int | None,
    quiet: bool,
    min_au: float | None,
    what_if_ms: list[float] | None,
    wide: bool = False,
    loaders_named: str | None = None,
) -> None:
    """`iobench run` once its values are checked: launch torchrun, or find the dataset, resolve every
    configuration, measure the limits once, run each configuration and save its record as it ends."""
    if nproc is not None:
        launch_torchrun(nproc, ARGV, where, configs, ConsoleEvents(quiet))
        return
    with joined(where.device, timeout_s=where.rank_timeout) as (world, own_device):
        quiet = quiet or not world.is_main  # one progress bar and one table, from rank 0
        target_device = resolve_device(own_device)
        configs, skipped = without_memory_resident(configs, loaders_named, target_device.type == "cpu")
        notes = [*notes, *skipped]
        if not configs:
            raise IobenchError(skipped[0])
        configs = [settle_device(c, target_device) for c in configs]  # machine checks before any dataset
        formats = tuple(dict.fromkeys(c.format for c in configs))
        dataset_dir = dataset_for_run(world, where.data_dir, where.dataset, formats, ConsoleEvents(quiet), where.size)
        with served(where.remote, where.endpoint_url, dataset_dir, where.fuse) as remote:
            todo = resolve_all(configs, RunTarget(dataset_dir, target_device, remote), world)
            limits = None
            if world.is_main:
                for note in notes:
                    say(note)
                if remote is not None and todo and todo[0].manifest.spec.n_samples >= QUICK_SIZE:
                    n = todo[0].manifest.spec.n_samples
                    say(f"reading {n:,} samples from object storage: a configuration can take minutes (a GET per run "
                        "of samples, each its first byte's wait); `--size 2e4` for a first look")  # fmt: skip
                limits = limits_of(remote, dataset_dir, target_device, where.results, where.read_limit)
            world.barrier()  # no rank reads while rank 0 measures the machine's limits
            profile_dir = where.results.parent / "profiles" if where.cprofile else None
            records: list[RunRecord] = []
            estimates = _estimates(todo, quiet or not world.is_main or world.size > 1)
            started = time.monotonic()
            if interleaved(todo):
                records = run_interleaved(todo, quiet, limits, profile_dir, estimates, world, where, dataset_dir.name,
                                          min_au, wide)  # fmt: skip
            else:
                try:
                    for k, resolved in enumerate(todo):
                        at = standing(k, len(todo), time.monotonic() - started, estimates)
                        records.append(run_one(resolved, quiet, limits, profile_dir, at))
                        if world.is_main:
                            save(where.results, records[-1])
                except KeyboardInterrupt:
                    if world.is_main and records:  # what finished is kept: show it before the interruption's line
                        place = where.place_flags(dataset_dir.name)
                        print_run(records, dataset_dir.name, where.results, min_au, wide, place)
                        say(f"interrupted after {len(records)} of {len(todo)} configurations; their records are kept")
                    raise
    if world.is_main:
        print_run(records, dataset_dir.name, where.results, min_au, wide, where.place_flags(dataset_dir.name))
        if what_if_ms:
            measure_what_if(todo, records, what_if_ms, where.results, limits, quiet)


def interleaved(todo: list[ResolvedRun]) -> bool:
    """Several configurations of several runs each: measured run by run in turn (A, B, A, B ...)."""
    return len(todo) > 1 and all(r.config.runs > 1 for r in todo)


def run_interleaved(todo: list[ResolvedRun], quiet: bool, limits: MachineLimits | RemoteLimits | None,
                    profile_dir: Path | None, estimates: list[Estimate | None], world: Any, where: RunPlace,
                    dataset: str, min_au: float | None, wide: bool) -> list[RunRecord]:  # fmt: skip
    """Run k of every configuration before run k + 1 of any (hyperfine's and pyperf's way: a shared machine's drift
    over minutes then falls inside each configuration's runs, not between two configurations, which two identical runs
    90 s apart had called -16.4%); each configuration's record once its last run is done. Interrupted, each
    configuration that finished a run is recorded with the runs it had, and those records are kept."""
    from iobench.run.runner import Measuring

    runs = max(r.config.runs for r in todo)
    total = sum(r.config.runs * (r.config.warmup + r.config.epochs) for r in todo)
    known = [x for x in estimates if x is not None]
    ahead = (
        f", about {time_range(sum(x.low for x in known), sum(x.high for x in known))}"
        if len(known) == len(todo)
        else ""
    )
    label = f"{len(todo)} configurations, their runs in turn{ahead}"
    records: list[RunRecord] = []
    with run_progress(label, total, quiet) as bar:
        measuring = [Measuring(r, limits, profile_dir, bar) for r in todo]
        try:
            for k in range(runs):
                for m in measuring:
                    if k < m.resolved.config.runs:
                        bar.label = m.resolved.config.label
                        m.one_run()
        except KeyboardInterrupt:
            records = [m.record() for m in measuring if m.runs_done]
            if world.is_main and records:
                for record in records:
                    save(where.results, record)
                print_run(records, dataset, where.results, min_au, wide, where.place_flags(dataset))
                say(f"interrupted in run {k + 1} of {runs}; the runs each configuration had finished are recorded")
            raise
    records = [m.record() for m in measuring]
    if world.is_main:
        for record in records:
            save(where.results, record)
    return records


@contextmanager
def served(profile: Profile | None, endpoint_url: str | None, dataset_dir: Path, fuse: FuseOptions | None = None
           ) -> Iterator[RemoteTarget | None]:  # fmt: skip
    """With a profile: the data folder served as S3 on loopback, behind the shaper, for as long as the block
    runs (stopped on every exit); with an endpoint: that store, as it is; without either: nothing."""
    from iobench.storage.remote.emulator import Emulator
    from iobench.storage.remote.endpoint import store_at

    fuse = fuse or FuseOptions()
    if endpoint_url is not None:
        yield RemoteTarget(store_at(endpoint_url), None, fuse=fuse)
        return
    if profile is None:
        yield None
        return

    from iobench.data.manifest import served_files

    emulator = Emulator(dataset_dir.parent, profile, served=served_files([dataset_dir]))
    with emulator as endpoint:
        yield RemoteTarget(endpoint, profile, emulator.access_log, emulator.pids, dataset_dir.parent, fuse,
                           emulator.settings)  # fmt: skip


def limits_of(remote: RemoteTarget | None, dataset_dir: Path, device: torch.device, results: Path,
              read_limit: float | None = None) -> MachineLimits | RemoteLimits | None:  # fmt: skip
    """The ceilings the records are held to: this machine's (measured once, then stored beside the results), or,
    reading object storage, the stored ones of that store and profile."""
    if remote is None:
        return stored_or_measured(results, dataset_dir, device, ConsoleEvents(), read_limit)
    return remote_limits(remote, dataset_dir, results)


def remote_limits(remote: RemoteTarget, dataset_dir: Path, results: Path) -> RemoteLimits | None:
    """The stored ceilings of this store and profile (measured by `iobench limits --remote` in a process of its
    own: measuring here would start obstore's runtime before the workers fork)."""
    from iobench.measuring.object_store_ceilings import stored_remote_limits

    if remote.profile is not None:
        say(f"serving {dataset_dir.parent} at {remote.endpoint.url} (S3, {remote.profile.describe()})")
    else:
        bucket = remote.endpoint.bucket_for(dataset_dir.name)
        say(f"reading {dataset_dir.name}'s formats from s3://{bucket} at {remote.endpoint.url}")
    limits = stored_remote_limits(results, remote)
    if limits is None:
        how = remote.profile.options() if remote.profile is not None else f"--endpoint-url {remote.endpoint.given}"
        say(f"no ceilings stored for this store and profile (% of limit: -); `iobench limits {how}` measures them")
    return limits


def _estimates(todo: list[ResolvedRun], skip: bool) -> list[Estimate | None]:
    """Each configuration's time, from a few measured batches of each (several configurations, one process only)."""
    if skip or len(todo) < 2:
        return [None] * len(todo)
    from iobench.run.estimates import estimated_seconds

    found = [estimated_seconds(r) for r in todo]
    if all(x is not None for x in found):
        total = time_range(sum(x.low for x in found), sum(x.high for x in found))  # type: ignore[union-attr]
        say(f"{len(todo)} configurations, about {total} in all (from a few measured batches of each)")
    return found
