"""`--loader dali`: NVIDIA DALI's image pipeline over a `files` dataset, in DALI's CPU-only mode (`device_id=None`)
here: every sample once per epoch with its own label, PNGs decoded to the exact pixels written, photos cropped to the
sample's shape, an epoch cut short followed by whole ones, and one-line refusals. Skipped where DALI is not installed
(`pip install 'iobench[dali]'`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from iobench.data.dataset import generate
from iobench.data.manifest import Manifest
from iobench.loaders import LOADERS, LoaderName
from iobench.measuring.clocks import time_epoch
from iobench.run.building import build_loader
from tests.conftest import assert_one_line_error, invoke, resolved_run, stored_records
from tests.formats.test_photos import photo_folder

pytestmark = [
    pytest.mark.skipif(
        not LOADERS[LoaderName.DALI].installed, reason="NVIDIA DALI is not installed (pip install 'iobench[dali]')"
    ),
    pytest.mark.extras,
]
N = 70  # PNG samples of 3x16x12: batches of 16 end with a partial one


@pytest.fixture(scope="module")
def png_dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dali")
    invoke(
        "prepare", "--size", N, "--shape", "3,16,12", "--dtype", "uint8", "--formats", "files", "--data-dir", root, "-q"
    )
    (d,) = root.iterdir()
    return d


@pytest.fixture(scope="module")
def photos_dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dali_photos")
    invoke(
        "prepare",
        "--from",
        photo_folder(root, per_class=8),
        "--shape",
        "3,48,40",
        "--formats",
        "files",
        "--data-dir",
        root / "data",
        "-q",
    )
    (d,) = (root / "data").iterdir()
    return d


def _epochs(resolved, epochs: int) -> list[tuple[list, np.ndarray]]:
    loader = build_loader(resolved)
    out = []
    try:
        for epoch in range(epochs):
            loader.prepare(epoch)
            arrived: list = []
            timing = time_epoch(loader, epoch, lambda b, kept=arrived: kept.append((b[0].clone(), b[1].clone())))
            out.append((arrived, loader.delivered(epoch, timing.samples)))
    finally:
        loader.close()
    return out


def test_every_png_arrives_once_an_epoch_with_its_pixels_and_label(png_dataset):
    chunks = list(generate(Manifest.load(png_dataset).spec))
    features, labels = np.concatenate([c.features for c in chunks]), np.concatenate([c.labels for c in chunks])
    resolved = resolved_run(png_dataset, "files", "dali", batch_size=16, num_workers=2)
    for arrived, delivered in _epochs(resolved, 3):
        got_f = torch.cat([b[0] for b in arrived]).numpy()
        got_l = torch.cat([b[1] for b in arrived]).numpy()
        assert sorted(delivered.tolist()) == list(range(N)), "every sample once, the epoch not crossing into the next"
        assert np.array_equal(got_f, features[delivered]) and np.array_equal(got_l, labels[delivered])


def test_shuffled_by_dalis_own_reader_and_in_order_without_it(png_dataset):
    shuffled = _epochs(resolved_run(png_dataset, "files", "dali", batch_size=16), 2)
    assert [d.tolist() for _, d in shuffled][0] != list(range(N))
    in_order = _epochs(resolved_run(png_dataset, "files", "dali", batch_size=16, shuffle=False), 1)
    assert in_order[0][1].tolist() == list(range(N))


def test_photos_are_cropped_to_the_samples_shape(photos_dataset):
    resolved = resolved_run(photos_dataset, "files", "dali", batch_size=8)
    ((arrived, delivered),) = _epochs(resolved, 1)
    assert all(tuple(b[0].shape[1:]) == (3, 48, 40) and b[0].dtype == torch.uint8 for b in arrived)
    assert sorted(delivered.tolist()) == list(range(Manifest.load(photos_dataset).spec.n_samples))


def test_an_epoch_cut_short_is_followed_by_whole_ones(png_dataset):
    resolved = resolved_run(png_dataset, "files", "dali", batch_size=16)
    loader = build_loader(resolved)
    try:
        loader.prepare(0)
        for k, _ in enumerate(loader.epoch(0)):
            if k == 1:
                break
        loader.prepare(1)
        seen = [b[1] for b in loader.epoch(1)]
        assert sorted(loader.delivered(1, N).tolist()) == list(range(N)) and sum(len(x) for x in seen) == N
    finally:
        loader.close()


def test_a_run_records_it_and_npy_samples_are_one_line(png_dataset, tmp_path, cli):
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--data-dir",
        png_dataset.parent,
        "--format",
        "files",
        "--loader",
        "dali",
        "--batch-size",
        "16",
        "--runs",
        "1",
        "--epochs",
        "2",
        "--results",
        results,
        "-q",
    )
    assert r.code == 0, r.err
    (record,) = stored_records(results)
    assert record["loader"] == "dali" and record["samples_per_epoch"] == N
    invoke("prepare", "--size", 50, "--shape", "8", "--formats", "files", "--data-dir", tmp_path / "rows", "-q")
    r = cli(
        "run",
        "--data-dir",
        tmp_path / "rows",
        "--format",
        "files",
        "--loader",
        "dali",
        "--results",
        tmp_path / "rows.jsonl",
    )
    assert_one_line_error(r, "--loader dali reads files of images")
