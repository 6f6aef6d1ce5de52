"""A configuration's settings in a few words, as every table, answer and warning names it: what differs between
configurations, and what ran (the record's decoder, not what was asked)."""

from __future__ import annotations

from iobench.loaders import kind_of
from iobench.plan.run_options import TRANSFORM_LABEL, option_labels
from iobench.results.record import RunRecord
from iobench.settings import settings_parts


def settings_label(r: RunRecord, measured: bool = True) -> str:
    """The knobs of a record that differ between configurations, in a few characters; `measured=False`
    leaves out what was measured (a transform's cost), for a name that keys a configuration."""
    c = r.config
    size, workers, *rest = settings_parts(c.settings)
    parts = [size, workers]
    if c.backend:  # under torchrun, where the thread count is torchrun's to set
        nodes = f"/{r.ranks.nodes}n" if r.ranks.nodes > 1 else ""
        parts = [f"ranks={c.world_size}{nodes}", *parts, f"threads={r.environment.torch_threads}"]
    if (kind := kind_of(c.loader)) is not None and "fetch" in kind.honours:  # the DataLoader, nodes and spdl
        parts.append(f"fetch={c.settings.fetch}")
    transform = transform_parts(r) if measured else [transform_label(r)] if transform_label(r) else []
    options = [c.format_options] if c.format_options else []
    written = [f"written({c.format_written})"] if c.format_written else []
    # what decoded, and where, as the record says (not what was asked): `decode@device` is a key, never prose
    said = decode_label(r.system.decoder) if r.system.decoder else "decode asked on the device"
    rest = [said if part == DECODE_ASKED else part for part in rest]
    return " ".join(parts + rest + option_labels(c) + transform + options + written)


DECODE_ASKED = "decode@device"  # --decode-on device's label (iobench.settings), before the run says what decoded


def decode_label(decoder: str) -> str:
    """The record's decoder in a few words: its library and the side it ran on (`decode: Pillow on host`). On a
    machine without torchvision --decode-on device decodes with Pillow on the host, and `decode@device` said
    otherwise."""
    import re

    library = decoder.split()[0] if decoder.split() else "?"
    device = re.search(r" on (cuda(?::\d+)?)", decoder)
    where = device.group(1) if device else "CPU" if "on the CPU" in decoder else "host"
    return f"decode: {library} on {where}"


def transform_label(r: RunRecord) -> str:
    """The transform and where it ran (augment@host); empty without one."""
    return " ".join(option_labels(r.config, TRANSFORM_LABEL))


def transform_parts(r: RunRecord) -> list[str]:
    """The transform, where it ran, and what one sample of it costs on the host."""
    label = transform_label(r)
    if not label:
        return []
    cost = r.epochs.transform_us_per_sample
    return [label + (f" ({cost:,.0f} µs/sample)" if cost is not None else "")]
