"""Every record's configuration built one way: a run's (`ResolvedRun.recorded`), tune's over a user's Dataset and
`iobench.measure`'s, so that equal values measured the same thing whichever path wrote them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from iobench.plan.run_options import recorded_options
from iobench.results.record import RecordedConfig
from iobench.settings import LoaderSettings


def recorded_config(
    *,
    loader: str,
    settings: LoaderSettings,
    shuffle: bool,
    order: str | None = None,
    options: Mapping[str, Any] | None = None,
    **fields: Any,
) -> RecordedConfig:
    """The configuration as its record stores it: the settings with pinning decided (None, "on with CUDA", was
    settled before the run), the order (shuffle or sequential unless a block order is named), every run option as
    its declaration stores it (those a measurement does not have at their defaults), and the fields given."""
    return RecordedConfig(
        loader=str(loader),
        settings=replace(settings, pin_memory=bool(settings.pin_memory)),
        order=order if order is not None else "shuffle" if shuffle else "sequential",
        shuffle=shuffle,
        **recorded_options(options or {}),
        **fields,
    )
