"""A run configuration as `iobench run`'s arguments: what feed's ranks run, built from the typed configuration and
place by the options' own declarations (`iobench.settings`, `iobench.plan.run_options`), never written flag by flag
where it is used (feed wrote run's flags by hand: a renamed flag would have broken a feed run, not a unit test).
tests/plan/test_argv.py parses the arguments back through the command line and finds the same configuration."""

from __future__ import annotations

from typing import Any

from iobench.choices import Choice
from iobench.plan.config import Order, RunConfig
from iobench.plan.place import RunPlace
from iobench.plan.run_options import RUN, RUN_OPTIONS
from iobench.plan.timing import Timing
from iobench.settings import SETTINGS


def run_argv(config: RunConfig, place: RunPlace) -> list[str]:
    """`run`'s arguments for one configuration: every value that differs from the command line's default, and where
    (the data folder, the dataset, the device, the results file, and a store's URL where the formats are read from
    one: never its keys, which go in the environment)."""
    args = ["run", "--format", config.format, "--loader", str(config.loader)]
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
    for key, value in config.format_options:
        args += ["--format-option", f"{config.format}.{key}={_text(value)}"]
    args += ["--data-dir", str(place.data_dir), "--device", str(place.device), "--results", str(place.results)]
    args += ["--endpoint-url", place.endpoint_url] if place.endpoint_url is not None else []  # its keys: the env's
    return args + (["--dataset", place.dataset] if place.dataset is not None else [])


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
