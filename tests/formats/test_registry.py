"""Formats as plug-ins: a package registers one through the `iobench.formats` entry-point group, and it
is listed, written, verified and read like the built-in formats."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import numpy as np
import pytest

from iobench.errors import IobenchError
from iobench.formats import ENTRY_POINT_GROUP, FORMATS, Registered, Registry, plug_ins
from tests.conftest import ROOT, assert_one_line_error, invoke, stored_records

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

TOY = metadata.EntryPoint("toy", "tests.toy_format:ToyFormat", ENTRY_POINT_GROUP)
PIPED = metadata.EntryPoint("piped", "tests.toy_format:PipedFormat", ENTRY_POINT_GROUP)


@pytest.fixture
def toy_registered():
    """The toy format registered in the live registry for one test, then removed again."""
    entries, built = dict(FORMATS._entries), dict(FORMATS._built)
    for entry in plug_ins([TOY, PIPED]):
        FORMATS.register(entry)
    yield
    FORMATS._entries, FORMATS._built = entries, built


def test_entry_points_become_formats_that_are_written_only_when_named():
    (entry,) = plug_ins([TOY])
    assert entry == Registered("toy", "tests.toy_format:ToyFormat", default=False, declares=None)
    registry = Registry((Registered("npy", "iobench.formats.npy:NpyFormat"), entry))
    assert list(registry) == ["npy", "toy"] and registry.defaults == ("npy",)
    assert registry["toy"].name == "toy"
    registry.register(Registered("npy", "tests.toy_format:ToyFormat"))  # a plug-in cannot replace a built-in
    assert registry["npy"].name == "npy"


def test_a_broken_plug_in_is_one_line():
    registry = Registry((Registered("broken", "tests.toy_format:NotAFormat"), Registered("gone", "no.such:Thing")))
    with pytest.raises(IobenchError, match="'broken' .* is not a StorageFormat"):
        registry["broken"]
    with pytest.raises(IobenchError, match="'gone' .* could not be loaded"):
        registry["gone"]


def test_a_plug_in_format_is_prepared_verified_and_read(toy_registered, tmp_path, cli):
    data = tmp_path / "data"
    invoke("prepare", "--size", "300", "--shape", "3,4", "--formats", "npy,toy", "--data-dir", data, "-q")
    (dataset,) = data.iterdir()
    assert np.array_equal(np.load(dataset / "toy/features.npy"), np.load(dataset / "npy/features.npy"))
    assert cli("verify", "--data-dir", data).code == 0
    r = cli(
        "run",
        "--format",
        "toy",
        "--loader",
        "dataloader",
        "--runs",
        "1",
        "--device",
        "cpu",
        "-q",
        "--data-dir",
        data,
        "--results",
        tmp_path / "r.jsonl",
    )
    assert r.code == 0, r.err
    (record,) = stored_records(tmp_path / "r.jsonl")
    assert record["format"] == "toy" and record["samples_per_epoch"] == 300


def test_an_installed_plug_in_appears_in_prepare_help():
    """The entry point is faked in a child process before iobench is imported, as pip would install it."""
    code = (
        "import importlib.metadata as m, sys\n"
        "real = m.entry_points\n"
        f"toy = m.EntryPoint('toy', 'tests.toy_format:ToyFormat', {ENTRY_POINT_GROUP!r})\n"
        f"m.entry_points = lambda **kw: [toy] if kw.get('group') == {ENTRY_POINT_GROUP!r} else real(**kw)\n"
        "from iobench.cli import main\n"
        "main(['prepare', '--help'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"},
    )
    built_in = ", ".join(n for n in FORMATS if n != "toy")  # the registry's names, then the plug-in's
    assert f"{built_in}, toy" in done.stdout, done.stdout + done.stderr


BROKEN = [
    metadata.EntryPoint(name, f"tests.toy_format:{cls}", ENTRY_POINT_GROUP)
    for name, cls in (("raises", "Raises"), ("exits", "Exits"))
]


@pytest.fixture
def broken_registered():
    entries, built, refused = dict(FORMATS._entries), dict(FORMATS._built), list(FORMATS.refused)
    for entry in plug_ins([*BROKEN, TOY]):
        FORMATS.register(entry)
    yield
    FORMATS._entries, FORMATS._built, FORMATS.refused = entries, built, refused


def test_a_plug_in_that_fails_is_skipped_by_all_and_refused_when_named(broken_registered, tmp_path, cli):
    """a plug-in that raised made `prepare --formats all` fail; one raising SystemExit ended iobench."""
    r = cli("prepare", "--size", "100", "--shape", "4", "--formats", "all", "--data-dir", tmp_path, "-q")
    assert r.code == 0, r.err
    assert "skipped format 'raises'" in r.err and "RuntimeError: a bug in the plug-in" in r.err
    assert "skipped format 'exits'" in r.err and "SystemExit: 3" in r.err
    (dataset,) = tmp_path.iterdir()
    assert (dataset / "toy").is_dir() and not (dataset / "raises").exists()
    for name, reason in (("raises", "a bug in the plug-in"), ("exits", "SystemExit")):
        r = cli("prepare", "--size", "100", "--shape", "4", "--formats", name, "--data-dir", tmp_path / name, "-q")
        assert_one_line_error(r, f"format {name!r}", reason)


def test_a_plug_in_that_raises_keyboardinterrupt_ends_as_an_interrupt_says_so(tmp_path):
    code = (
        "import importlib.metadata as m\n"
        "real = m.entry_points\n"
        f"bad = m.EntryPoint('interrupts', 'tests.toy_format:Interrupts', {ENTRY_POINT_GROUP!r})\n"
        f"m.entry_points = lambda **kw: [bad] if kw.get('group') == {ENTRY_POINT_GROUP!r} else real(**kw)\n"
        "from iobench.cli import main\n"
        f"main(['prepare', '--size', '100', '--formats', 'interrupts', '--data-dir', {str(tmp_path)!r}, '-q'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 130 and "iobench: interrupted" in done.stderr, done.stderr


@pytest.mark.parametrize("name", ["all", "a,b", "Upper", "x y", ""])
def test_a_plug_in_name_a_command_line_could_not_give_is_refused(name):
    """plug-in names `all` and `a,b` were accepted."""
    refused: list[str] = []
    point = metadata.EntryPoint(name, "tests.toy_format:ToyFormat", ENTRY_POINT_GROUP)
    assert plug_ins([point], refused) == ()
    assert len(refused) == 1 and repr(name) in refused[0]


def test_a_plug_in_brings_its_own_pipeline_and_loaders_read_it_by_capability(toy_registered, tmp_path, cli):
    """`--loader native` reads a plug-in that declares a pipeline, and `direct` one whose reader has a fixed
    layout (both inherit npy's); one without a pipeline is refused in one line."""
    from iobench.loaders import LOADERS, LoaderName

    assert "piped" in FORMATS.native and "toy" not in FORMATS.native
    assert {"toy", "piped", "npy", "memmap"} <= set(LOADERS[LoaderName.DIRECT].reads)
    assert "hdf5" not in LOADERS[LoaderName.DIRECT].reads
    data = tmp_path / "data"
    invoke("prepare", "--size", "300", "--shape", "3,4", "--formats", "toy,piped", "--data-dir", data, "-q")
    r = cli(
        "run",
        "--format",
        "piped",
        "--loader",
        "native",
        "--runs",
        "1",
        "--device",
        "cpu",
        "-q",
        "--batch-size",
        "64",
        "--data-dir",
        data,
        "--results",
        tmp_path / "r.jsonl",
    )
    assert r.code == 0, r.err
    (record,) = stored_records(tmp_path / "r.jsonl")
    assert (record["format"], record["loader"], record["samples_per_epoch"]) == ("piped", "native", 300)
    assert record["shuffle_spread"] is not None  # the delivered order came back with the batches
    refused = cli(
        "run",
        "--format",
        "toy",
        "--loader",
        "native",
        "--runs",
        "1",
        "--device",
        "cpu",
        "-q",
        "--data-dir",
        data,
        "--results",
        tmp_path / "r.jsonl",
    )
    assert_one_line_error(refused, "--loader native does not read --format toy")


def test_a_built_in_format_declares_in_the_registry_what_its_class_declares():
    """The registry restates built-in capabilities so that listing imports nothing; the class is the truth."""
    from iobench.formats import capabilities

    for name, entry in FORMATS._entries.items():
        if entry.declares is not None and FORMATS.installed(name):
            assert entry.declares == capabilities(FORMATS[name]), name
