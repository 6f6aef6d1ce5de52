"""--transform: one implementation per sample (host) and batched (device); the run times it and says so."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from iobench.errors import IobenchError
from iobench.loaders.transforms import IMAGENET_MEAN, IMAGENET_STD, PAD, make_transform, parse_transform
from iobench.plan.config import RunConfig
from tests.conftest import assert_one_line_error, invoke, stored_records

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("text, expected", [("none", "none"), (" Augment ", "augment"), ("cpu:50", "cpu:50")])
def test_transform_names_are_normalised(text, expected):
    assert parse_transform(text) == expected


@pytest.mark.parametrize("text", ["blur", "cpu:", "cpu:-1", "cpu:nan"])
def test_unknown_transforms_are_refused(text):
    with pytest.raises(IobenchError, match="unknown transform"):
        parse_transform(text)


def _unnormalise(x):
    mean = torch.tensor(IMAGENET_MEAN)[:, None, None] * 255
    std = torch.tensor(IMAGENET_STD)[:, None, None] * 255
    return x * std + mean


def test_small_images_are_padded_cropped_and_flipped_windows_of_the_sample():
    torch.manual_seed(0)
    image = torch.randint(0, 256, (3, 16, 16), dtype=torch.uint8)
    padded = torch.nn.functional.pad(image, (PAD,) * 4).float()
    t = make_transform("augment", (3, 16, 16), "uint8")
    flips = 0
    for _ in range(40):
        out = _unnormalise(t.sample(image)).round()
        assert out.shape == (3, 16, 16) and out.dtype == torch.float32
        windows = [padded[:, i : i + 16, j : j + 16] for i in range(2 * PAD + 1) for j in range(2 * PAD + 1)]
        plain = any(torch.equal(out, w) for w in windows)
        flipped = any(torch.equal(out, w.flip(-1)) for w in windows)
        assert plain or flipped
        flips += flipped and not plain
    assert 5 < flips < 35  # a fair coin


def test_a_batch_gets_one_crop_and_flip_per_sample_and_is_normalised():
    torch.manual_seed(1)
    batch = torch.randint(0, 256, (64, 3, 96, 96), dtype=torch.uint8)  # above 64 px: random resized crop
    t = make_transform("augment", (3, 96, 96), "uint8")
    out = t.batch(batch)
    assert out.shape == batch.shape and out.dtype == torch.float32
    # normalised: uniform 0..255 noise maps to about (127.5 - mean) / std per channel
    expected = (127.5 - torch.tensor(IMAGENET_MEAN) * 255) / (torch.tensor(IMAGENET_STD) * 255)
    np.testing.assert_allclose(out.mean(dim=(0, 2, 3)), expected, atol=0.1)
    same_crop = [torch.equal(out[0], out[k]) for k in range(1, 64)]
    assert not any(same_crop)
    per_sample = t.per_samples(batch[:4])
    assert per_sample.shape == (4, 3, 96, 96)


def test_non_image_samples_are_standardised_per_sample():
    torch.manual_seed(2)
    t = make_transform("augment", (128,), "float32")
    out = t.batch(torch.rand(32, 128) * 10 + 3)
    np.testing.assert_allclose(out.mean(dim=1), 0, atol=1e-4)
    np.testing.assert_allclose(out.std(dim=1), 1, atol=1e-3)


def test_a_cpu_cost_takes_at_least_its_time_and_leaves_the_sample_alone():
    t = make_transform("cpu:2000", (8,), "float32")
    x = torch.arange(8.0)
    start = time.perf_counter()
    assert torch.equal(t.per_samples(torch.stack([x, x, x])), torch.stack([x, x, x]))
    assert time.perf_counter() - start >= 3 * 0.002


@pytest.mark.parametrize(
    "config, fragment",
    [
        (dict(transform="cpu:10", transform_on="device"), "use --transform-on host"),
        (dict(transform="augment", loader="gpu-resident"), "use --transform-on device"),
        (dict(transform="augment", loader="direct", format="npy"), "use --transform-on device"),
        (dict(transform="augment", transform_on="gpu"), "--transform-on must be one of"),
    ],
)
def test_transforms_that_cannot_run_where_asked_are_refused(config, fragment):
    with pytest.raises(IobenchError, match=fragment):
        RunConfig(**{"format": "memmap", **config})


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("transform")
    invoke("prepare", "--workload", "small-image", "--size", 600, "--formats", "files,memmap", "--data-dir", root)
    invoke("limits", "--data-dir", root, "--results", root / "r.jsonl", "--probe-size", "16M")
    return root


def test_files_with_augment_and_two_workers_runs_and_records_the_transform(images, cli):
    results = images / "r.jsonl"
    r = cli(
        "run",
        "--data-dir",
        images,
        "--format",
        "files",
        "--transform",
        "augment",
        "--num-workers",
        "2",
        "--batch-size",
        "64",
        "--runs",
        "1",
        "--device",
        "cpu",
        "-q",
        "--results",
        results,
    )
    assert r.code == 0, r.err
    assert "augment@host" in r.out and "µs/sample" in r.out
    record = stored_records(results)[-1]
    assert record["transform"] == "augment" and record["transform_on"] == "host"
    assert record["transform_us_per_sample"] > 0
    assert record["workload"] == "small-image" and record["source"] is None


def test_a_device_transform_is_its_own_stage(images, cli):
    results = images / "device.jsonl"
    r = cli(
        "run",
        "--data-dir",
        images,
        "--format",
        "memmap",
        "--loader",
        "tensorclass",
        "--transform",
        "augment",
        "--transform-on",
        "device",
        "--batch-size",
        "64",
        "--runs",
        "1",
        "--device",
        "cpu",
        "-q",
        "--results",
        results,
        "--wide",
    )
    assert r.code == 0, r.err
    record = stored_records(results)[-1]
    assert record["transform_on"] == "device" and record["transform_ms_per_batch"] > 0
    assert "transform" in r.out.split("per batch (ms)")[1]


def test_a_transform_typo_is_one_line(images, cli):
    r = cli("run", "--data-dir", images, "--format", "files", "--transform", "blur", "--device", "cpu")
    assert_one_line_error(r, "unknown transform 'blur'")
