"""Run configurations as `iobench run`'s arguments: what feed's ranks and `run --nproc`'s ranks run, built from the
typed configurations and place by the options' own declarations (`iobench.settings`, `iobench.plan.run_options`),
never written flag by flag where it is used (feed wrote run's flags by hand: a renamed flag would have broken a feed
run, not a unit test; `--nproc` passed on the command line as typed). tests/plan/test_argv.py parses the arguments back
through the command line and finds the same configurations and place."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from iobench.choices import Choice
from iobench.plan.config import Order, RunConfig
from iobench.plan.place import RunPlace
from iobench.plan.run_options import RUN, RUN_OPTIONS
from iobench.plan.timing import Timing
from iobench.settings import SETTINGS


def configs_argv(configs: Sequence[RunConfig], place: RunPlace, formats: str | None, loaders: str | None) -> list[str]:
    """`run`'s arguments for configurations one command line made (`--format` and `--loader` as named, None where
    left to the default pairs: the command line pairs them again the same way; the rest alike in every configuration,
    each format's --format-option its own). ValueError where the configurations differ in anything else: no one
    command line gives them."""
    first = configs[0]
    alike = [replace(c, format=first.format, loader=first.loader, format_options=first.format_options) for c in configs]
    if any(c != first for c in alike):
        raise ValueError("configurations that differ beyond their format and loader are not one `run` command")
    args = ["run", *(["--format", formats] if formats is not None else [])]
    args += ["--loader", loaders] if loaders is not None else []
    args += _alike(first)
    read = dict.fromkeys((c.format, key, value) for c in configs for key, value in c.format_options)
    args += [part for f, key, value in read for part in ("--format-option", f"{f}.{key}={_text(value)}")]
    return args + _place(place)


def _alike(config: RunConfig) -> list[str]:
    """The loader settings, order, timing and run options that differ from their defaults."""
    args = []
    for setting in SETTINGS.values():
        value = getattr(config.settings, setting.name)
        if value != setting.default:
            args += _option(setting.option, setting.flag, value)
    if config.order is Order.SEQUENTIAL:
        args.append("--no-shuffle")
    elif config.order is Order.BLOCK:
        args += ["--block-shuffle", str(config.block_size)]
    timing = Timing()
    for name in ("epochs", "warmup", "runs", "max_seconds", "step", "seed"):
        if (value := getattr(config, name)) != getattr(timing, name):
            args += [f"--{name.replace('_', '-')}", _text(value)]
    if config.max_batches is not None:
        args += ["--max-batches", str(config.max_batches)]
    for option in RUN_OPTIONS.values():
        value = getattr(config, option.name)
        if RUN in option.commands and value != option.value(option.default):
            args += _option(option.option, "", value)
    return args


def _place(place: RunPlace) -> list[str]:
    """Where: the data folder, the dataset (or its size), the device, the results file, a store's URL (its keys: the
    environment's) and iobench's own store's options as typed, and the ranks' barrier timeout."""
    args = ["--data-dir", str(place.data_dir), "--device", str(place.device), "--results", str(place.results)]
    args += ["--endpoint-url", place.endpoint_url] if place.endpoint_url is not None else []
    args += [part for flag, value in place.typed if flag not in _PLACED for part in (flag, value)]
    args += ["--size", str(place.size)] if place.size is not None else []
    args += ["--profile"] if place.cprofile else []
    args += ["--rank-timeout", repr(place.rank_timeout)] if place.rank_timeout != RunPlace.rank_timeout else []
    return args + (["--dataset", place.dataset] if place.dataset is not None else [])


_PLACED = frozenset({"--data-dir", "--dataset", "--device", "--endpoint-url"})  # written by `_place` from its values


def _option(option: str, flag: str, value: Any) -> list[str]:
    """An option and its value as typed; a boolean as its on or off flag."""
    if isinstance(value, bool):
        on, _, off = (flag or f"{option}/--no-{option.removeprefix('--')}").partition("/")
        return [on if value else off]
    return [option, _text(value)]


def _text(value: Any) -> str:
    if isinstance(value, Choice):
        return value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    text = getattr(value, "text", None)  # a cache budget: as it was given
    return text if isinstance(text, str) else str(value)
