"""Decoding after the copy (`--decode-on device`): the loaders hand a batch's files over as they are, and the decoder
after the copy gives the samples the host path gives (Pillow: the same pixels), said in the record; what cannot go
with it is refused in one line."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from iobench.api import _opened
from iobench.formats import photos
from iobench.loaders import LOADERS, LoaderName
from iobench.loaders.decode import Decoder, crop_box, crop_resized, torchvision_io
from iobench.loaders.encoded import pack
from tests.conftest import assert_one_line_error, invoke, skip_reason, stored_records
from tests.formats.test_photos import photo_folder

SHAPE = (3, 48, 40)


@pytest.fixture(scope="module")
def photos_dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("decode")
    invoke(
        "prepare",
        "--from",
        photo_folder(root, per_class=8),
        "--shape",
        ",".join(map(str, SHAPE)),
        "--formats",
        "files,npy",
        "--data-dir",
        root / "data",
        "-q",
    )
    (dataset,) = (root / "data").iterdir()
    return dataset


def _pillow_decoder(dataset: Path, crop: str) -> tuple:
    reader, _ = _opened(dataset, "files", "none", {"crop": crop})
    return reader, Decoder(reader.spec, reader.options, torch.device("cpu"), pillow=True)


def test_files_handed_over_and_decoded_after_the_copy_are_the_host_paths_pixels(photos_dataset):
    reader, decoder = _pillow_decoder(photos_dataset, "centre")
    with reader:
        indices = np.arange(reader.spec.n_samples)[::-1].copy()
        files, labels = reader.encoded_batch(indices)
        host, host_labels = reader.batch(indices)
    decoded = decoder(pack(files))
    assert decoded.dtype == torch.uint8 and tuple(decoded.shape) == (len(indices), *SHAPE)
    assert np.array_equal(decoded.numpy(), host) and np.array_equal(labels, host_labels)


def test_each_handed_over_file_is_the_photo_byte_for_byte_and_decodes_as_pillow_decodes_it(photos_dataset):
    reader, decoder = _pillow_decoder(photos_dataset, "centre")
    with reader:
        files, _ = reader.encoded_batch(np.arange(4))
    kept = sorted((photos_dataset / "files" / "samples").rglob("*.img"))[:4]
    assert [f for f in files] == [p.read_bytes() for p in kept]
    for k, data in enumerate(files):
        with Image.open(io.BytesIO(data)) as image:
            expected = photos.cover_crop(image, SHAPE, "sample")  # Pillow's decode, the centre prepare kept
        assert np.array_equal(decoder(pack([data]))[0].numpy(), expected), k


def test_random_crops_after_the_copy_differ_between_reads_and_keep_the_shape(photos_dataset):
    reader, decoder = _pillow_decoder(photos_dataset, "random")
    with reader:
        files, _ = reader.encoded_batch(np.arange(6))
    a, b = decoder(pack(files)), decoder(pack(files))
    assert a.shape == b.shape == (6, *SHAPE) and not torch.equal(a, b)


def test_the_crop_and_resize_run_where_the_image_is_come_within_a_level_of_pillows():
    """The region and resize a torchvision decode is followed by (on the device: here on the CPU) against Pillow's
    resize and crop of the same photo (a smooth one: on noise any two resamplers differ)."""
    y, x = np.mgrid[0:301, 0:517]
    rgb = np.stack([128 + 100 * np.sin(x / 23), 128 + 100 * np.cos(y / 17), (x + y) * 255 / 818], -1).astype(np.uint8)
    expected = photos.cover_crop(Image.fromarray(rgb), SHAPE, "sample").astype(np.int16)
    box = crop_box("centre", 517, 301, SHAPE, np.random.default_rng(0))
    got = crop_resized(torch.from_numpy(rgb.copy()).permute(2, 0, 1), box, *SHAPE[1:]).numpy().astype(np.int16)
    assert got.shape == SHAPE
    assert np.abs(got - expected).mean() < 1.0, "within a level on average of Pillow's bilinear"


class _StandInIo:
    """torchvision.io's calls as Pillow answers them, counting the batched JPEG calls: the batching and the layout
    of `Decoder._torchvision` checked where torchvision does not import."""

    ImageReadMode = SimpleNamespace(RGB="RGB", GRAY="L")

    def __init__(self) -> None:
        self.jpeg_calls: list[int] = []

    @staticmethod
    def _decode(data: torch.Tensor, mode: str) -> torch.Tensor:
        with Image.open(io.BytesIO(data.numpy().tobytes())) as image:
            pixels = np.asarray(image.convert(mode)).copy()
        return (
            torch.from_numpy(pixels[None] if pixels.ndim == 2 else pixels).permute(2, 0, 1)
            if pixels.ndim == 3
            else torch.from_numpy(pixels[None])
        )

    def decode_jpeg(self, files: list[torch.Tensor], mode: str, device: str) -> list[torch.Tensor]:
        assert device == "cpu"
        self.jpeg_calls.append(len(files))
        return [self._decode(f, mode) for f in files]

    def decode_image(self, data: torch.Tensor, mode: str) -> torch.Tensor:
        assert data[:4].tolist() == [0x89, 0x50, 0x4E, 0x47], "only a PNG goes one by one"
        return self._decode(data, mode)


def test_a_batch_decoded_by_torchvision_takes_its_jpegs_in_one_call_and_its_pngs_on_the_host(photos_dataset):
    reader, _ = _opened(photos_dataset, "files", "none", {"crop": "centre"})
    stand_in = _StandInIo()
    decoder = Decoder(reader.spec, reader.options, torch.device("cpu"), tio=stand_in)
    with reader:
        files, _ = reader.encoded_batch(np.arange(reader.spec.n_samples))
    jpegs = sum(data[:2] == b"\xff\xd8" for data in files)
    decoded = decoder(pack(files))
    assert 0 < jpegs < len(files) and stand_in.jpeg_calls == [jpegs]
    assert tuple(decoded.shape) == (len(files), *SHAPE)
    for k, data in enumerate(files):  # each sample back in its place, the JPEGs' and the PNGs'
        image = _StandInIo._decode(torch.frombuffer(bytearray(data), dtype=torch.uint8), "RGB")
        box = crop_box("centre", image.shape[2], image.shape[1], SHAPE, np.random.default_rng(0))
        assert torch.equal(decoded[k], crop_resized(image, box, *SHAPE[1:])), k


@pytest.mark.skipif(torchvision_io() is None, reason="torchvision does not import beside this torch")
def test_torchvision_decodes_the_batch_on_the_cpu_close_to_the_host_path(photos_dataset):
    reader, _ = _opened(photos_dataset, "files", "none", {"crop": "centre"})
    decoder = Decoder(reader.spec, reader.options, torch.device("cpu"))
    with reader:
        files, _ = reader.encoded_batch(np.arange(8))
        host, _ = reader.batch(np.arange(8))
    assert "torchvision" in decoder.describe
    assert np.abs(decoder(pack(files)).numpy().astype(np.int16) - host).mean() < 3.0


@pytest.mark.parametrize(
    "loader",
    [
        "dataloader",
        pytest.param(
            "nodes",
            marks=pytest.mark.skipif(
                not LOADERS[LoaderName.NODES].installed,
                reason=skip_reason("torchdata"),
            ),
        ),
    ],
)
def test_run_with_decoding_after_the_copy_delivers_every_sample_and_records_the_decoder(
    photos_dataset, cli, tmp_path, loader
):
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--dataset",
        photos_dataset,
        "--format",
        "files",
        "--loader",
        loader,
        "--decode-on",
        "device",
        "--num-workers",
        2,
        "--batch-size",
        5,
        "--runs",
        1,
        "--epochs",
        1,
        "--device",
        "cpu",
        "--results",
        results,
        "-q",
    )
    assert r.code == 0, r.err
    (record,) = stored_records(results)
    assert record["samples_per_epoch"] == 24
    assert record["decode_on"] == "device"
    decoder = record["decoder"]
    assert decoder.startswith("Pillow") or decoder.startswith("torchvision"), decoder


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--format", "npy"), "npy stores decoded samples"),
        (("--fetch", "item"), "use --fetch batch"),
        (("--transform", "augment"), "use --transform-on device"),
        (("--loader", "tensorclass", "--format", "memmap"), "--loader tensorclass"),
    ],
)
def test_what_cannot_go_with_decoding_after_the_copy_is_refused_in_one_line(
    photos_dataset, cli, tmp_path, args, fragment
):
    r = cli(
        "run",
        "--dataset",
        photos_dataset,
        "--format",
        "files",
        "--decode-on",
        "device",
        *args,
        "--device",
        "cpu",
        "--results",
        tmp_path / "r.jsonl",
        "-q",
    )
    assert_one_line_error(r, fragment)
