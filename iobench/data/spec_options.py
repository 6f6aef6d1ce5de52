"""The dataset spec from prepare's options: a generated workload, or the user's own data (--from)."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.data.sources import open_source
from iobench.data.workloads import PRESETS, PresetName
from iobench.errors import IobenchError
from iobench.spec import Content, DatasetSpec
from iobench.units import DEFAULT_SIZE, parse_shape, parse_size


@dataclass(frozen=True, kw_only=True)
class SpecOptions:
    """prepare's options as given; None where the user gave none."""

    size: str | None = None
    workload: str = "tabular"
    shape: str | None = None
    dtype: str | None = None
    classes: int | None = None
    seed: int | None = None
    source: str | None = None
    labels: str | None = None
    features_key: str | None = None
    labels_key: str | None = None


def build_spec(o: SpecOptions, notes: list[str] | None = None) -> DatasetSpec:
    """The dataset to prepare; `notes` gets what was chosen for the user (a source's sample shape) in a sentence."""
    if o.source is not None:
        return _from_source(o, notes if notes is not None else [])
    if o.labels is not None or o.features_key is not None or o.labels_key is not None:
        raise IobenchError("--labels, --features-key and --labels-key go with --from")
    preset = PRESETS[PresetName.parse(o.workload, "--workload")]
    shape = parse_shape(o.shape) if o.shape is not None else preset.shape
    dtype = o.dtype.lower() if o.dtype is not None else preset.dtype
    # Photo and token content only where the shape and dtype can hold it; anything else is random.
    content = preset.content if (shape, dtype) == (preset.shape, preset.dtype) else Content.RANDOM
    size = parse_size(o.size) if o.size is not None else (preset.size or DEFAULT_SIZE)
    classes = o.classes if o.classes is not None else 1000
    return DatasetSpec(size, shape, dtype, classes, o.seed or 0, content)


def preset_formats(o: SpecOptions, formats: str) -> str:
    """The formats to write: files alone for a preset of a size distribution where the default list was left."""
    from iobench.formats import DEFAULT_FORMATS

    preset = PRESETS[PresetName.parse(o.workload, "--workload")] if o.source is None else None
    return "files" if preset and preset.files_options and formats == ",".join(DEFAULT_FORMATS) else formats


def preset_format_options(o: SpecOptions, formats: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """The write options a generated workload's preset sets (unet3d: files of DLIO's sizes); refused for formats
    that cannot hold samples of a size distribution."""
    if o.source is not None or not (options := PRESETS[PresetName.parse(o.workload, "--workload")].files_options):
        return {}
    if others := [f for f in formats if f != "files"]:
        raise IobenchError(
            f"--workload {o.workload}: its samples' files vary in size as DLIO's do, which only --format files "
            f"writes (a file a sample); not {', '.join(others)}"
        )
    return {"files": options}


def _from_source(o: SpecOptions, notes: list[str]) -> DatasetSpec:
    given = [
        name
        for name, value in (("--size", o.size), ("--dtype", o.dtype), ("--classes", o.classes), ("--seed", o.seed))
        if value is not None
    ]
    if o.workload != PresetName.TABULAR:
        given.append("--workload")
    if given:
        raise IobenchError(f"--from takes the samples, dtype and classes from the source; drop {', '.join(given)}")
    shape = parse_shape(o.shape) if o.shape is not None else None
    opened = open_source(o.source, o.labels, o.features_key, o.labels_key, shape)
    if opened.said:
        notes.append(f"--from {o.source}: {opened.said}")
    return DatasetSpec(opened.n_samples, opened.shape, opened.dtype, opened.n_classes, 0, source=opened.info)
