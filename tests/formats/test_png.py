"""iobench's batch PNG encoder writes what Pillow decodes to the same pixels, about as small as Pillow's."""

import io
import zlib

import numpy as np
import pytest
from PIL import Image

from iobench.data.dataset import generate
from iobench.formats.png import filter_rows, png_file
from iobench.spec import DatasetSpec

MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def decode(data: bytes) -> tuple[str, np.ndarray]:
    with Image.open(io.BytesIO(data), formats=["PNG"]) as image:
        return image.mode, np.asarray(image)


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("height,width", [(1, 1), (1, 9), (7, 1), (5, 3), (32, 32)])
def test_every_mode_and_shape_decodes_to_the_same_pixels(channels, height, width):
    rng = np.random.default_rng(height * 100 + width + channels)
    noise = rng.integers(0, 256, (4, height, width, channels), dtype=np.uint8)
    flat = np.full((1, height, width, channels), 200, np.uint8)
    ramp = (np.arange(height * width * channels, dtype=np.uint8) * 7).reshape(1, height, width, channels)
    images = np.concatenate([noise, flat, ramp])
    for image, rows in zip(images, filter_rows(images), strict=True):
        mode, pixels = decode(png_file(rows, channels))
        assert mode == MODES[channels]
        np.testing.assert_array_equal(pixels.reshape(height, width, channels), image)


def test_each_of_the_five_filters_is_chosen_and_undone_correctly():
    """Photo-like rows pick several filters; the decode check above is only a proof for filters in use."""
    spec = DatasetSpec(64, shape=(3, 32, 32), dtype="uint8", content="photo", seed=3)
    images = np.ascontiguousarray(np.moveaxis(next(generate(spec)).features, 1, -1))
    rows = filter_rows(images)
    edges = np.zeros((1, 8, 8, 1), np.uint8)
    edges[0, :, 4:] = 255  # a vertical edge: row 0 filters best with sub, the rows below with up
    noise = np.random.default_rng(1).integers(0, 256, (1, 3, 8, 1), dtype=np.uint8)  # no filter helps: none
    used = set(rows[:, :, 0].ravel()) | set(filter_rows(edges)[:, :, 0].ravel())
    used |= set(filter_rows(noise)[:, :, 0].ravel())
    assert used == {0, 1, 2, 3, 4}
    for image, r in zip(images, rows, strict=True):
        np.testing.assert_array_equal(decode(png_file(r, 3))[1], image)


def test_the_filter_choice_is_libpngs_minimum_sum_of_absolute_differences():
    image = np.random.default_rng(5).integers(0, 256, (1, 6, 5, 3), dtype=np.uint8)
    rows = filter_rows(image)[0]
    x = image[0].reshape(6, 15).astype(np.int64)
    for y in range(6):
        left = np.concatenate([[0, 0, 0], x[y, :-3]])
        up = x[y - 1] if y else np.zeros(15, np.int64)
        corner = np.concatenate([[0, 0, 0], up[:-3]])
        p = left + up - corner
        pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, corner))
        candidates = [x[y], x[y] - left, x[y] - up, x[y] - (left + up) // 2, x[y] - paeth]
        costs = [int(np.abs(((c % 256) + 128) % 256 - 128).sum()) for c in candidates]
        assert rows[y, 0] == int(np.argmin(costs))
        np.testing.assert_array_equal(rows[y, 1:], candidates[rows[y, 0]] % 256)


def test_photo_like_images_compress_about_as_well_as_with_pillow():
    spec = DatasetSpec(32, shape=(3, 32, 32), dtype="uint8", content="photo", seed=8)
    images = np.ascontiguousarray(np.moveaxis(next(generate(spec)).features, 1, -1))
    ours = sum(len(png_file(rows, 3)) for rows in filter_rows(images))
    pillow = 0
    for image in images:
        out = io.BytesIO()
        Image.fromarray(image).save(out, format="PNG")
        pillow += len(out.getvalue())
    assert 0.95 < ours / pillow < 1.05, (ours, pillow)


def test_every_chunk_carries_a_valid_crc():
    data = png_file(filter_rows(np.zeros((1, 2, 2, 3), np.uint8))[0], 3)
    position = 8
    while position < len(data):
        length = int.from_bytes(data[position : position + 4], "big")
        body = data[position + 4 : position + 8 + length]
        assert int.from_bytes(data[position + 8 + length : position + 12 + length], "big") == zlib.crc32(body)
        position += 12 + length
    assert position == len(data)


def test_a_chunk_is_filtered_a_few_mib_at_a_time_into_the_same_files(monkeypatch):
    """encode_png bounds its work arrays (about 20x the pixels filtered at once) by filtering in slices:
    each image's file is the one it gets encoded alone, in order, whatever the slice size."""
    from iobench.formats import png

    rng = np.random.default_rng(5)
    chw = rng.integers(0, 256, (11, 3, 8, 6), dtype=np.uint8)
    alone = [png.encode_png(chw[i : i + 1], "chw")[0] for i in range(len(chw))]
    monkeypatch.setattr(png, "PNG_FILTER_BYTES", 3 * chw[0].nbytes)  # slices of 3, the last of 2
    assert png.encode_png(chw, "chw") == alone
    assert [decode(f)[1].tolist() for f in alone] == np.moveaxis(chw, 1, -1).tolist()
    assert png.encode_png(chw[:0], "chw") == []
