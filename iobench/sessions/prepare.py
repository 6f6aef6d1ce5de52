"""`iobench prepare`, whole: the dataset's spec built (generated, or read from the user's --from), the formats that
can be written here chosen (each that cannot said), each format's write options from the values given, the disk
checked, then every format written atomically. Prints nothing: the command line prints the table."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobench.data.manifest import Manifest
from iobench.data.spec_options import SpecOptions
from iobench.events import Events


@dataclass(frozen=True)
class PrepareRequest:
    """`prepare` as its command gave it: the spec's options, the formats (a comma list), where, and each format's
    write options by format name (the named flags and `--format-option` merged by the command line)."""

    spec: SpecOptions
    formats: str
    data_dir: Path
    dataset: str | None = None
    force: bool = False
    format_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    typed_options: tuple[str, ...] = ()  # --format-option's NAME.KEY=VALUE texts, parsed against the formats chosen


@dataclass(frozen=True)
class PrepareOutcome:
    dataset_dir: Path
    formats: tuple[str, ...]
    manifest: Manifest


def prepare_session(request: PrepareRequest, events: Events) -> PrepareOutcome:
    """Build, choose, check, write (see the module's docstring)."""
    from iobench.data.format_options import parse_format_options
    from iobench.data.prepare import WriteRequest, options_of, parse_formats, plan, prepare
    from iobench.data.spec_options import build_spec, preset_format_options, preset_formats
    from iobench.formats import FORMATS

    notes: list[str] = []
    spec = build_spec(request.spec, notes)
    for note in notes:
        events.say(note)
    skipped: list[str] = []
    broken: list[str] = []
    names = parse_formats(preset_formats(request.spec, request.formats), skipped, broken)
    if skipped:
        events.say(f"skipped {', '.join(skipped)}: not installed (pip install 'iobench[formats]')")
    for why in broken:
        events.say(f"skipped {why}")
    given = {name: dict(values) for name, values in preset_format_options(request.spec, names).items()}
    for name, values in request.format_options.items():
        given[name] = {**given.get(name, {}), **values}
    for name, values in parse_format_options(list(request.typed_options), names).items():
        given[name] = {**given.get(name, {}), **values}
    checked = plan(
        WriteRequest(spec, request.data_dir, names, options_of(names, given), request.dataset, request.force)
    )
    dataset_dir = checked.request.dataset_dir
    each = ", ".join(
        f"{n} {FORMATS[n].estimate_bytes(spec, checked.request.options[n]) / 1e6:,.0f} MB" for n in names
    )  # a format's own size: files of DLIO's sizes are 70x the samples they hand over
    events.heading(
        f"preparing {dataset_dir}: {spec.n_samples:,} samples of {spec.shape} {spec.dtype}; up to about "
        f"{_size(checked.estimated_bytes)} on disk ({each})"
    )
    with events.progress() as progress:
        manifest = prepare(checked, progress)
    return PrepareOutcome(dataset_dir, names, manifest)


def _size(n: int) -> str:
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.0f} MB"
