"""The option groups a command takes, declared once and handed to it as one typed value each: the place (a
PlaceValues), the loader settings (a LoaderSettings, or sweep's comma lists), the run options, and a command's own
group (a frozen dataclass whose fields are its options). Typer sees every option of a group; the command's `def` names
the group."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from types import MappingProxyType
from typing import Annotated, Any, Optional

import typer

from iobench.choices import Choice
from iobench.cli.options import PLACE_OPTIONS, List
from iobench.plan.run_options import SWEEP, RunOption, swept_lists, taken_by
from iobench.settings import SETTINGS, LoaderSettings, Setting, swept


def _setting_option(s: Setting) -> inspect.Parameter:
    """run's option of one declared setting: its flag, help and default as declared."""
    kind = str if issubclass(s.kind, Choice) else s.kind
    default = s.default.value if isinstance(s.default, Choice) else s.default
    option = typer.Option(*([s.flag] if s.flag else []), help=s.help)
    return inspect.Parameter(
        s.name, _KEYWORD, default=default, annotation=Annotated[kind | None if s.optional else kind, option]
    )


def _run_option(o: RunOption) -> inspect.Parameter:
    """A command's option of one declared run option (`iobench.plan.run_options`): its flag, help and default."""
    option = typer.Option(o.option, help=o.help)
    kind = Optional[o.kind] if o.default is None else o.kind  # noqa: UP045 - typer reads it at runtime
    return inspect.Parameter(o.name, _KEYWORD, default=o.default, annotation=Annotated[kind, option])


def _sweep_option(s: Setting) -> inspect.Parameter:
    """sweep's option of one declared setting: a comma list of its values."""
    return inspect.Parameter(s.name, _KEYWORD, default=None, annotation=List(s.option, s.sweep))


_KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD


def takes_settings(after: str, sweep: bool = False) -> Callable[[Callable], Callable]:
    """A command's options for the declared settings (`iobench.settings`), placed after its option `after`, handed
    to the command as its `settings`: a LoaderSettings (run), or each setting's comma list of values by name (sweep:
    what it sweeps)."""
    if sweep:
        return _spliced([_sweep_option(s) for s in swept()], after, "settings", lambda values, ctx: dict(values))
    return _spliced(
        [_setting_option(s) for s in SETTINGS.values()], after, "settings", lambda values, ctx: LoaderSettings(**values)
    )


def takes_place(after: str | None = None, first: bool = False) -> Callable[[Callable], Callable]:
    """A measuring command's place options (`iobench.plan.place.PLACE`: the data folder, the dataset, the device and
    object storage), declared once here, placed after its option `after` (or first), handed to the command as its
    `place` (a PlaceValues, which `iobench.plan.place.place_of` checks and makes a RunPlace)."""
    from iobench.plan.place import PLACE, PlaceValues

    options = [
        inspect.Parameter(name, _KEYWORD, default=PLACE_OPTIONS[name][1], annotation=PLACE_OPTIONS[name][0])
        for name in PLACE
    ]

    def build(values: dict[str, Any], ctx: typer.Context | None) -> PlaceValues:
        return PlaceValues(**values, flags=tuple(place_flags(ctx).items()) if ctx is not None else ())

    return _spliced(options, after, "place", build, first)


def place_flags(ctx: typer.Context) -> dict[str, str]:
    """Each place option's flag, by parameter name (for the commands iobench prints)."""
    return {p.name: p.opts[0] for p in ctx.command.params if p.name in PLACE_OPTIONS}


def takes_run_options(command: str, after: str) -> Callable[[Callable], Callable]:
    """A command's options for the run options it takes (`iobench.plan.run_options`), placed after its option
    `after`, handed to the command as its `run_options`: each value by the option's name, as
    `iobench.plan.run_options.run_options_of` reads them. sweep also takes a comma list of those its declaration
    lists (`--cache cold,warm`)."""
    options = [_run_option(o) for o in taken_by(command)]
    if command == SWEEP:
        options += [
            inspect.Parameter(o.name, _KEYWORD, default=None, annotation=List(o.option, o.sweep_list))
            for o in swept_lists()
        ]
    return _spliced(options, after, "run_options", lambda values, ctx: MappingProxyType(dict(values)))


def _spliced(
    options: list[inspect.Parameter],
    after: str | None,
    target: str,
    build: Callable[[dict[str, Any], typer.Context | None], object],
    first: bool = False,
) -> Callable[[Callable], Callable]:
    """The command with these options spliced into the signature typer reads (after its option `after`, or first),
    their values built into one typed value (`build`) and handed to it as its parameter `target`: its `def` names
    the group, and typer sees each option."""
    names = [p.name for p in options]

    def wrap(function: Callable) -> Callable:
        signature = inspect.signature(function, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != target]
        own_first = 1 if own and own[0].name == "ctx" else 0
        at = own_first if first else next(k for k, p in enumerate(own) if p.name == after) + 1

        @functools.wraps(function)
        def command(*args: Any, **values: Any) -> Any:
            group = {name: values.pop(name) for name in names if name in values}
            ctx = values.get("ctx", args[0] if args and isinstance(args[0], typer.Context) else None)
            return function(*args, **values, **{target: build(group, ctx)})

        command.__signature__ = signature.replace(parameters=[*own[:at], *options, *own[at:]])  # type: ignore[attr-defined]
        return command

    return wrap


def takes_group(cls: type, after: str | None, target: str, first: bool = False) -> Callable[[Callable], Callable]:
    """A command's own options as a frozen dataclass `cls` declares them (each field: its typer annotation and
    default), placed after its option `after` (or first), handed to it as `target`, a `cls`."""
    hints = typing.get_type_hints(cls, include_extras=True)
    options = [
        inspect.Parameter(f.name, _KEYWORD, default=f.default, annotation=hints[f.name])
        for f in dataclasses.fields(cls)
    ]
    return _spliced(options, after, target, lambda values, ctx: cls(**values), first)
