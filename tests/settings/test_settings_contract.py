"""The contract every declared setting keeps (`iobench.settings.SETTINGS`), as the format contract suite does for
formats: from its one declaration come its option in `run` (and in `sweep` when it declares a comma list), its
field in the run's settings and in the record (nested in memory, flat on disk), its check against every loader
(a loader that does not declare it refuses it, one that does takes it), its DataLoader keyword, its label, the
values tune searches and how a pasted command sets it again."""

from __future__ import annotations

import inspect
from dataclasses import fields, replace

import pytest
from torch.utils.data import DataLoader
from typer.testing import CliRunner

from iobench.choices import Choice
from iobench.cli.app import app
from iobench.errors import IobenchError
from iobench.loaders import LOADERS
from iobench.plan.config import RunConfig
from iobench.results.record import RunRecord
from iobench.settings import (
    SETTINGS,
    LoaderSettings,
    Setting,
    command_flags,
    dataloader_arguments,
    settings_parts,
    swept,
)
from tests.conftest import FLAT_RECORD

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

EVERY = pytest.mark.parametrize("setting", list(SETTINGS.values()), ids=list(SETTINGS))


def other_value(s: Setting) -> object:
    """A value of the setting other than its default, as a user would give it."""
    if s.kind is bool:
        return not s.default if s.default is not None else True
    if s.kind is int:
        return (s.default or s.minimum or 0) + 2
    if isinstance(s.kind, type) and issubclass(s.kind, Choice):
        return next(f for f in s.kind if f != s.default)
    return "auto"


def with_value(s: Setting, value: object) -> LoaderSettings:
    """Settings that set `s` to `value`, with the workers a setting that needs them has."""
    workers = {"num_workers": 2} if s.needs_workers and s.name != "num_workers" else {}
    return LoaderSettings(**{**workers, s.name: value})


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    runner = CliRunner()
    return {cmd: runner.invoke(app, [cmd, "--help"], env={"COLUMNS": "300"}).output for cmd in ("run", "sweep")}


@EVERY
def test_its_field_has_its_default(setting):
    field = {f.name: f for f in fields(LoaderSettings)}[setting.name]
    assert field.default == setting.default and getattr(LoaderSettings(), setting.name) == setting.default


@EVERY
def test_run_has_its_option_and_sweep_its_comma_list(setting, helps):
    assert setting.option in helps["run"]
    assert (setting.option in helps["sweep"]) == bool(setting.sweep)
    if setting.sweep:
        values = setting.parse_list(
            ",".join(str(v).lower() for v in (setting.default, other_value(setting)) if v is not None)
        )
        assert other_value(setting) in values or str(other_value(setting)) in map(str, values)


@EVERY
def test_the_record_keeps_it_flat_on_disk_and_reads_it_back(setting):
    value = other_value(setting)
    record = RunRecord.from_json({**FLAT_RECORD, "batch_size": 16, "num_workers": 2})
    record = replace(
        record, config=replace(record.config, settings=replace(record.config.settings, **{setting.name: value}))
    )
    stored = record.to_json()
    assert "settings" not in stored and stored[setting.name] == (value.value if isinstance(value, Choice) else value)
    assert getattr(RunRecord.from_json(stored).config.settings, setting.name) == value


@EVERY
@pytest.mark.parametrize("kind", list(LOADERS.values()), ids=[k.name.value for k in LOADERS.values()])
def test_every_loader_takes_it_only_where_it_declares_it(setting, kind):
    """Set to another value than its default, a setting is refused in one line naming it by every loader that does
    not declare it (unless declared as read without it elsewhere), and taken by every loader that does. A loader whose
    library is missing is skipped, saying so (CI's extras stage installs them: ray, nodes, spdl, ray-data)."""
    value = other_value(setting)
    if not kind.installed:
        pytest.skip(f"{kind.name} needs {kind.library} (pip install 'iobench[{kind.extra}]')")
    if not kind.reads:
        return
    fmt = "memmap" if "memmap" in kind.reads else kind.reads[0]
    workers = max(kind.min_workers, 2 if setting.needs_workers else 0)
    values = (
        {"num_workers": workers, setting.name: value}
        if setting.name != "num_workers"
        else {"num_workers": max(value, kind.min_workers)}
    )
    settings = LoaderSettings(**values)
    if setting.name in kind.honours:
        assert kind.refusal(settings) is None, (kind.name, setting.name)
    elif setting.refused_elsewhere and setting.name != "num_workers":
        # a setting that needs workers, on a loader that takes none: the workers are what it names
        shown = setting.shown(value).split(" ")[0]
        named = "--num-workers" if setting.needs_workers and "num_workers" not in kind.honours else shown
        with pytest.raises(IobenchError, match=f"--loader {kind.name} does not take {named}"):
            RunConfig(format=fmt, loader=kind.name, settings=settings)


@EVERY
def test_its_dataloader_keyword_is_torchs(setting):
    if not setting.dataloader:  # no keyword of torch's: changing it leaves the DataLoader's keywords as they were
        changed = dataloader_arguments(with_value(setting, other_value(setting)))
        assert changed == dataloader_arguments(with_value(setting, setting.default))
        return
    assert setting.dataloader in inspect.signature(DataLoader).parameters
    arguments = dataloader_arguments(with_value(setting, other_value(setting)))
    assert setting.dataloader in arguments
    DataLoader(range(8), batch_size=2, **arguments)  # torch takes what it is given


@EVERY
def test_its_label_names_a_value_other_than_the_default(setting):
    label = setting.label(other_value(setting))
    if label is not None:
        assert label in settings_parts(with_value(setting, other_value(setting)))


@EVERY
def test_the_values_tune_searches_are_valid(setting):
    for cuda in (False, True):
        for remote in (False, True):
            for value in setting.searched(cuda, remote):
                with_value(setting, value)  # a valid LoaderSettings
    assert set(setting.searched(False)) <= set(setting.searched(True)) or setting.tune_cpu is not None


@EVERY
def test_a_pasted_command_sets_it_again(setting):
    """What tune pastes as `iobench run ...` names every setting not at its default on that device."""
    value = other_value(setting)
    flags = command_flags(with_value(setting, value), cuda=False)
    if setting.name in ("batch_size", "num_workers"):  # always written beside the command
        return
    assert setting.shown(value).split(" ")[0] in flags


def test_sweep_takes_exactly_the_settings_that_declare_a_comma_list():
    assert [s.name for s in swept()] == [s.name for s in SETTINGS.values() if s.sweep]
