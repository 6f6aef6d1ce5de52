"""Lance (`pylance`): what its folder may hold before the library opens it, and its pipeline's refusal of worker
processes (it is not fork-safe)."""

from __future__ import annotations

import os

import pytest

from iobench.errors import IobenchError
from tests.conftest import assert_one_line_error, needs_module, prepare_with_limits

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

needs_module("lance")


@pytest.fixture
def dataset(tmp_path):
    prepare_with_limits(tmp_path, "600", "lance")  # limits.json beside r.jsonl: a run says nothing else first
    (found,) = (tmp_path / "data").iterdir()
    return found


def _data_files(dataset):
    return sorted((dataset / "lance" / "data.lance" / "data").iterdir())


def test_a_link_in_the_lance_folder_is_refused_in_one_line(dataset, tmp_path, cli):
    os.symlink("/etc/passwd", dataset / "lance" / "data.lance" / "data" / "extra.lance")
    r = cli(
        "run",
        "--data-dir",
        dataset.parent,
        "--format",
        "lance",
        "--loader",
        "native",
        "--runs",
        "1",
        "-q",
        "--results",
        tmp_path / "r.jsonl",
    )
    assert_one_line_error(r, "not a regular file or folder of the lance dataset")


def test_a_data_file_the_manifest_names_must_be_its_own(dataset):
    """Checked before any read (iobench's own manifest check says a missing file first, as for every format)."""
    from contextlib import ExitStack

    from iobench.data.manifest import Manifest
    from iobench.formats.lance import open_checked

    first = _data_files(dataset)[0]
    first.rename(first.with_name("moved-away"))
    with ExitStack() as stack, pytest.raises(IobenchError, match="not one of its own"):
        open_checked(dataset / "lance", Manifest.load(dataset).spec, stack)


def test_its_pipeline_takes_no_worker_processes(dataset, tmp_path, cli):
    r = cli(
        "run",
        "--data-dir",
        dataset.parent,
        "--format",
        "lance",
        "--loader",
        "native",
        "--num-workers",
        "1",
        "--runs",
        "1",
        "--batch-size",
        "64",
        "-q",
        "--results",
        tmp_path / "r.jsonl",
    )
    assert_one_line_error(r, "lance is not fork-safe")


def test_a_reader_not_fork_safe_is_refused_by_the_dataloaders_forked_workers_and_read_by_threads(
    dataset, tmp_path, cli
):
    """Lance's runtime does not survive a fork (a forked child that reopened it died now and then in CI): the
    DataLoader's workers refuse it in one line, and its reads with no workers are unchanged."""
    common = (
        "--data-dir",
        dataset.parent,
        "--format",
        "lance",
        "--runs",
        "1",
        "--epochs",
        "1",
        "--batch-size",
        "64",
        "-q",
    )
    r = cli("run", *common, "--loader", "dataloader", "--num-workers", "2", "--results", tmp_path / "r.jsonl")
    assert_one_line_error(r, "lance is not fork-safe: the DataLoader's workers are forked")
    assert not (tmp_path / "r.jsonl").exists()
    r = cli("run", *common, "--loader", "dataloader", "--num-workers", "0", "--results", tmp_path / "ok.jsonl")
    assert r.code == 0, r.err
    assert (tmp_path / "ok.jsonl").exists()


def test_a_lance_dataset_of_other_rows_or_fields_is_refused_in_one_line(tmp_path):
    """The refusal printed the Arrow schema as Arrow prints it: four lines."""
    import lance
    import pyarrow as pa

    from iobench.errors import IobenchError
    from iobench.formats.lance import check_opened, schema_of
    from iobench.spec import DatasetSpec

    spec = DatasetSpec(10, shape=(4,))
    for table in (
        pa.table({"x": pa.array([1, 2, 3])}),
        pa.Table.from_pylist([], schema=schema_of(spec)),
    ):
        ds = lance.write_dataset(table, str(tmp_path / f"d{table.num_columns}"))
        with pytest.raises(IobenchError) as refused:
            check_opened(ds, spec, {f.path for fr in ds.get_fragments() for f in fr.data_files()}, "here", "its own")
        assert "\n" not in str(refused.value) and "the spec says 10 of (features" in str(refused.value)
