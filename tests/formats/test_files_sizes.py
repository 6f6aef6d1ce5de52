"""files of a size distribution (files.file_bytes, DLIO's unet3d): each sample a file of the size drawn for it as DLIO
draws a record's, the sample handed over, every byte read; a run counts the bytes read; prepare --workload unet3d
writes files alone."""

from __future__ import annotations

import json

import numpy as np
import pytest

from iobench.data.dlio_records import UNET3D
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.formats.files_layout import FilesOptions, file_sizes, npy_file_bytes, sample_path
from iobench.spec import DatasetSpec
from tests.formats.test_formats import expected, write

SPEC = DatasetSpec(40, shape=(64,), dtype="uint8", n_classes=3, seed=5)
SIZED = {"file_bytes": 20_000, "file_bytes_stdev": 6_000}


def test_sizes_are_drawn_as_dlio_draws_them():
    """Two sides of a normal of mean sqrt(mean) and stdev stdev / 2 / sqrt(mean), their product: unet3d's files
    average its record_length; their own stdev is about 0.7 of record_length_stdev (a product of two normals)."""
    spec = DatasetSpec(20_000, shape=(UNET3D.handed_bytes,), dtype="uint8")
    sizes = file_sizes(spec, FilesOptions(**UNET3D.files_options))
    assert sizes is not None and sizes.dtype == np.int64 and len(sizes) == spec.n_samples
    assert abs(sizes.mean() / UNET3D.mean_bytes - 1) < 0.01
    assert 0.6 < sizes.std() / UNET3D.stdev_bytes < 0.8
    assert sizes.min() >= npy_file_bytes(spec) and len(set(sizes.tolist())) > spec.n_samples // 2
    # the seed's: the same dataset draws the same sizes, another seed others
    assert np.array_equal(sizes, file_sizes(spec, FilesOptions(**UNET3D.files_options)))
    other = DatasetSpec(20_000, shape=spec.shape, dtype="uint8", seed=1)
    assert not np.array_equal(sizes, file_sizes(other, FilesOptions(**UNET3D.files_options)))
    assert file_sizes(spec, FilesOptions()) is None


@pytest.mark.parametrize(
    "options, said",
    [
        ({"file_bytes_stdev": 5}, "needs file_bytes"),
        ({"file_bytes": -1}, "must be 0.."),
        ({"file_bytes": 2**33}, "must be 0.."),
        ({"file_bytes": 10_000, "encoding": "png"}, "pads .npy samples"),
    ],
)
def test_options_that_cannot_be_written_are_refused(options, said):
    with pytest.raises(IobenchError, match=said):
        FilesOptions(**options)


def test_a_spec_of_unet3d_shape_is_not_called_unet3d():
    """The preset is its files' sizes, which a spec does not hold: a 2 MiB uint8 dataset of any format is custom."""
    from iobench.data.workloads import workload_of
    from iobench.spec import Content

    assert workload_of((UNET3D.handed_bytes,), "uint8", Content.RANDOM) == "custom"
    assert workload_of((128,), "float32", Content.RANDOM) == "tabular"


def test_too_many_samples_to_hold_their_sizes_is_refused():
    with pytest.raises(IobenchError, match="at most 1,000,000"):
        file_sizes(DatasetSpec(1_000_001, shape=(4,), dtype="uint8"), FilesOptions(file_bytes=100))


def test_each_file_is_its_drawn_size_and_reads_back_the_sample(tmp_path):
    reader = write(tmp_path, "files", SPEC, **SIZED)
    sizes = file_sizes(SPEC, reader.options)
    on_disk = [(tmp_path / "files" / sample_path(i, SPEC, "npy")).stat().st_size for i in range(SPEC.n_samples)]
    assert on_disk == sizes.tolist() and len(set(on_disk)) > 10
    features, labels = expected(SPEC)
    with reader:
        got, got_labels = reader.batch(np.arange(SPEC.n_samples))
    assert np.array_equal(got, features) and np.array_equal(got_labels, labels)
    fmt = FORMATS["files"]
    assert fmt.read_bytes(SPEC, reader.options) == round(sizes.mean()) + 8 > SPEC.sample_bytes
    assert fmt.read_bytes(SPEC, FilesOptions("npy")) == SPEC.sample_bytes
    assert fmt.estimate_bytes(SPEC, reader.options) >= sum(on_disk)


@pytest.mark.parametrize("change, said", [("cut", "bytes short of the"), ("grow", "longer than the")])
def test_a_file_not_of_its_drawn_size_is_refused_when_read(tmp_path, change, said):
    reader = write(tmp_path, "files", SPEC, **SIZED)
    path = tmp_path / "files" / sample_path(3, SPEC, "npy")
    data = path.read_bytes()
    path.write_bytes(data[:-1] if change == "cut" else data + b"\0")
    with reader, pytest.raises(ValueError, match=said):
        reader.batch(np.array([3]))


def test_prepare_workload_unet3d_writes_files_alone_and_a_run_counts_the_bytes_read(tmp_path, cli):
    """The preset's sizes (here scaled down with --format-option), files chosen for the user; a run's MB/s is the
    files' bytes read, its record's sample_bytes their mean and the label."""
    data = tmp_path / "data"
    scaled = ["--format-option", "files.file_bytes=40000", "--format-option", "files.file_bytes_stdev=9000"]
    r = cli("prepare", "--workload", "unet3d", "--size", "64", "--shape", "256", "--data-dir", data, *scaled)
    assert r.code == 0, r.err
    (folder,) = [p for p in data.iterdir() if p.is_dir()]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert list(manifest["formats"]) == ["files"]
    assert manifest["formats"]["files"]["options"]["file_bytes"] == 40_000
    refused = cli("prepare", "--workload", "unet3d", "--size", "64", "--format", "npy,files", "--data-dir", data)
    assert refused.code == 2 and "only --format files" in refused.err and "not npy" in refused.err
    results = tmp_path / "r.jsonl"
    r = cli("run", "--format", "files", "--data-dir", data, "--batch-size", "8", "--results", results, "--quiet")
    assert r.code == 0, r.err
    from iobench.results.store import read_records

    (record,) = read_records(results)
    spec = DatasetSpec(64, shape=(256,), dtype="uint8")
    mean = file_sizes(spec, FilesOptions(file_bytes=40_000, file_bytes_stdev=9_000)).mean()
    assert record.dataset.sample_bytes == round(mean) + 8 and record.dataset.sample_shape == [256]
    e = record.epochs
    assert e.mb_per_s == pytest.approx(e.samples_per_s * record.dataset.sample_bytes / 1e6, rel=0.02)
