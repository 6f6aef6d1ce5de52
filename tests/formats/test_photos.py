"""Photos as users keep them (JPEG and PNG mixed, any size, grey among colour, in class folders): prepared without
--shape, kept as they are by `files`, read by decoding and cropping to the training size; the pre-decoded formats
made from the same photos beside them."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from iobench.formats import photos
from tests.conftest import skip_reason, stored_records


def photo_folder(root: Path, per_class: int = 6) -> Path:
    rng = np.random.default_rng(0)
    for name in ("cats", "dogs", "grey"):
        folder = root / "photos" / name
        folder.mkdir(parents=True)
        for i in range(per_class):
            h, w = int(rng.integers(60, 160)), int(rng.integers(60, 160))
            image = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
            image = image.convert("L") if name == "grey" else image
            image.save(folder / (f"{i}.png" if i % 3 == 0 else f"{i}.jpg"))
    return root / "photos"


def test_a_photo_folder_prepares_as_files_kept_as_they_are_and_reads_by_decode_and_crop(tmp_path, cli):
    source = photo_folder(tmp_path)
    data = tmp_path / "data"
    r = cli("prepare", "--from", source, "--formats", "files,npy", "--data-dir", data, "-q")
    assert r.code == 0, r.err
    (dataset,) = data.iterdir()
    manifest = json.loads((dataset / "manifest.json").read_text())
    assert manifest["spec"]["shape"] == list(photos.DEFAULT_SHAPE)  # the training size, no --shape needed
    assert manifest["formats"]["files"]["options"]["encoding"] == "photos"
    kept = {f["path"]: f["bytes"] for f in manifest["formats"]["files"]["files"] if f["path"].startswith("samples/")}
    originals = sorted(p.stat().st_size for p in source.rglob("*") if p.is_file())
    assert sorted(kept.values()) == originals, "every photo kept byte for byte"
    assert cli("verify", "--data-dir", data, "-q").code == 0  # read as prepare read them: their centres
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--data-dir",
        data,
        "--format",
        "files,npy",
        "--loader",
        "dataloader",
        "--batch-size",
        6,
        "--runs",
        1,
        "--device",
        "cpu",
        "--results",
        results,
        "-q",
    )
    assert r.code == 0, r.err
    by_format = {x["format"]: x for x in stored_records(results)}
    assert by_format["files"]["samples_per_epoch"] == by_format["npy"]["samples_per_epoch"] == 18


def test_a_kept_photo_is_cropped_at_random_each_read_and_at_its_centre_for_verify(tmp_path):
    source = photo_folder(tmp_path, per_class=2)
    path = next(source.rglob("*.jpg"))
    rng = np.random.default_rng(1)
    with open(path, "rb") as f:
        a = photos.decode(f, (3, 32, 32), "random", rng, path.name)
    with open(path, "rb") as f:
        b = photos.decode(f, (3, 32, 32), "random", rng, path.name)
    with open(path, "rb") as f, Image.open(f) as image:
        centre = photos.cover_crop(image, (3, 32, 32), path.name)
    with open(path, "rb") as f:
        assert np.array_equal(photos.decode(f, (3, 32, 32), "centre", rng, path.name), centre)
    assert a.shape == b.shape == (3, 32, 32) and a.dtype == np.uint8 and not np.array_equal(a, b)


@pytest.mark.parametrize(("width", "height"), [(50, 50), (500, 20), (20, 500)])
def test_the_random_box_stays_inside_the_photo(width, height):
    rng = np.random.default_rng(0)
    for _ in range(200):
        left, top, right, bottom = photos.random_box(width, height, rng)
        assert 0 <= left < right <= width and 0 <= top < bottom <= height


def test_a_photo_that_declares_too_many_pixels_is_refused_before_it_is_decoded(tmp_path):
    path = tmp_path / "huge.png"
    Image.new("L", (1, 1)).save(path)
    raw = bytearray(path.read_bytes())
    raw[16:24] = (9000).to_bytes(4, "big") + (9000).to_bytes(4, "big")  # IHDR width, height: 81 megapixels
    raw[29:33] = zlib.crc32(bytes(raw[12:29])).to_bytes(4, "big")  # the chunk's CRC, so that it reads as valid
    path.write_bytes(bytes(raw))
    with open(path, "rb") as f, pytest.raises(ValueError, match="more than the 64,000,000"):
        photos.decode(f, (3, 8, 8), "random", np.random.default_rng(), path.name)


def _declaring(path: Path, side: int) -> Path:
    """A PNG whose header declares side x side pixels (a bomb's header: nothing behind it)."""
    Image.new("RGB", (1, 1)).save(path)
    raw = bytearray(path.read_bytes())
    raw[16:24] = side.to_bytes(4, "big") + side.to_bytes(4, "big")
    raw[29:33] = zlib.crc32(bytes(raw[12:29])).to_bytes(4, "big")
    path.write_bytes(bytes(raw))
    return path


@pytest.mark.parametrize("side", [10_000, 14_000])  # 100 M pixels: Pillow's warning; 196 M: its error
@pytest.mark.parametrize("one_size", [True, False])
def test_prepare_from_a_folder_with_a_photo_above_pillows_limit_is_one_line(tmp_path, cli, side, one_size):
    """Above Pillow's pixel limit `prepare --from` ended in a traceback (DecompressionBombError); between 89 M and 179 M
    pixels Pillow's warning was printed before iobench's line."""
    folder = photo_folder(tmp_path)
    if one_size:  # every other image the bomb's size: the shape is read from the headers
        for path in folder.rglob("*.*"):
            path.unlink()
        for name in ("cats", "dogs", "grey"):
            _declaring(folder / name / "a.png", side)
    else:
        _declaring(folder / "cats" / "big.png", side)
    r = cli("prepare", "--from", folder, "--data-dir", tmp_path / "data", "--formats", "npy", "-q")
    assert r.code in (1, 2), r.err
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in r.err and "Warning" not in r.err, r.err
    assert "more than the 64,000,000" in lines[0], lines[0]


@pytest.mark.parametrize("fetch", ["batch", "item"])
@pytest.mark.parametrize("loader", ["dataloader", "nodes", "spdl"])
def test_a_photo_that_does_not_decode_is_one_line_naming_it_whatever_reads_it(tmp_path, cli, loader, fetch):
    """SPDL logged each failed task's traceback, dropped its batch and blamed "a file its library could not read and
    skipped?" (delivered 32 of the 40 samples)."""
    from iobench.loaders import LOADERS, LoaderName

    if not LOADERS[LoaderName(loader)].installed:
        pytest.skip(skip_reason(LOADERS[LoaderName(loader)].library or loader))
    cli(
        "prepare",
        "--from",
        photo_folder(tmp_path),
        "--formats",
        "files",
        "--files-encoding",
        "photos",
        "--data-dir",
        tmp_path / "data",
        "-q",
    )
    bad = sorted((tmp_path / "data").rglob("samples/*/*.img"))[5]
    raw = bad.read_bytes()
    bad.write_bytes(raw[:100] + bytes(len(raw) - 100))  # its size kept: the run checks sizes before reading
    threads = ["--num-workers", "2"] if loader != "dataloader" else []
    r = cli(
        "run",
        "--format",
        "files",
        "--loader",
        loader,
        *threads,
        "--fetch",
        fetch,
        "--batch-size",
        4,
        "--data-dir",
        tmp_path / "data",
        "--runs",
        1,
        "--results",
        tmp_path / "r.jsonl",
        "-q",
    )
    assert r.code == 1 and "Traceback" not in r.err, r.err[-3000:]
    lines = [line for line in r.err.splitlines() if line.startswith("iobench:")]
    assert len(lines) == 1 and bad.relative_to(bad.parents[2]).as_posix() in lines[0], lines
    assert "skipped" not in lines[0]
