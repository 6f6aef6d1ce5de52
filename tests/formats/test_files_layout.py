"""prepare --from FOLDER --files-encoding source: the files format keeps each source image as it is (a JPEG
folder stays JPEG), reads back exactly the shared samples, and refuses in one line what it cannot keep."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from PIL import Image

from iobench.data.manifest import Manifest
from iobench.data.verify import verify_dataset
from iobench.formats import FORMATS

SIZE = (24, 16)  # width, height


def photo_folder(root, kind: str, modes=("RGB", "L", "CMYK", "RGB")):
    """Two classes of noisy images of one size; modes other than RGB are converted by the source."""
    rng = np.random.default_rng(7)
    for k, mode in enumerate(modes):
        folder = root / ("ant" if k < 2 else "bee")
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (SIZE[1], SIZE[0], 3), dtype=np.uint8)
        image = Image.fromarray(pixels).convert(mode)
        if kind == "png" and mode == "CMYK":  # PNG has no CMYK: a palette image instead
            image = Image.fromarray(pixels).convert("P")
        image.save(folder / f"{k}.{kind}", **({"quality": 85} if kind == "jpg" else {}))
    return root


def source_files(root):
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("kind", ["jpg", "png"])
def test_source_encoding_keeps_each_file_and_reads_back_the_shared_samples(tmp_path, cli, kind):
    photos = photo_folder(tmp_path / "photos", kind)
    shape = f"3,{SIZE[1]},{SIZE[0]}"  # the images' own size (a greyscale one makes the channels ambiguous)
    r = cli(
        "prepare",
        "--from",
        photos,
        "--shape",
        shape,
        "--formats",
        "npy,files",
        "--files-encoding",
        "source",
        "--data-dir",
        tmp_path / "data",
        "-q",
    )
    assert r.code == 0, r.err
    (dataset,) = (tmp_path / "data").iterdir()
    manifest = Manifest.load(dataset)
    options = FORMATS["files"].options_from_json(manifest.formats["files"].options)
    assert (options.encoding, options.suffix) == ("source", kind)
    kept = sorted((dataset / "files/samples").rglob(f"*.{kind}"))
    assert [hashlib.sha256(p.read_bytes()).digest() for p in kept] == [
        hashlib.sha256(p.read_bytes()).digest() for p in source_files(photos)
    ]  # byte for byte, in the source's order
    features = np.load(dataset / "npy/features.npy")
    with FORMATS["files"].reader(dataset / "files", manifest.spec, options) as reader:
        got, labels = reader.read_range(0, len(features))
    np.testing.assert_array_equal(got, features)
    np.testing.assert_array_equal(labels, [0, 0, 1, 1])
    checks, _ = verify_dataset(dataset)
    assert all(c.ok for c in checks), [c.problems for c in checks]
    # what a user without iobench reads: Pillow alone, converted to RGB as the folder source does
    alone = np.stack([np.moveaxis(np.asarray(Image.open(p).convert("RGB")), -1, 0) for p in kept])
    np.testing.assert_array_equal(alone, features)


def test_a_kept_jpeg_that_changes_is_caught_by_verify(tmp_path, cli):
    photos = photo_folder(tmp_path / "photos", "jpg", modes=("RGB", "RGB"))
    assert (
        cli(
            "prepare",
            "--from",
            photos,
            "--formats",
            "files",
            "--files-encoding",
            "source",
            "--data-dir",
            tmp_path / "data",
            "-q",
        ).code
        == 0
    )
    (dataset,) = (tmp_path / "data").iterdir()
    (kept,) = [p for p in (dataset / "files/samples").rglob("1.jpg")]
    data = bytearray(kept.read_bytes())
    data[len(data) // 2] ^= 0xFF
    kept.write_bytes(bytes(data))
    checks, _ = verify_dataset(dataset)
    assert not checks[0].ok


def refusals(tmp_path):
    mixed = photo_folder(tmp_path / "mixed", "jpg", modes=("RGB",))
    (mixed / "bee").mkdir()
    Image.new("RGB", SIZE).save(mixed / "bee" / "0.png")
    sizes = photo_folder(tmp_path / "sizes", "jpg", modes=("RGB", "RGB"))
    Image.new("RGB", (30, 20)).save(sizes / "ant" / "1.jpg")  # the writer finds it: only the first is read early
    return [
        (["--size", "20", "--workload", "small-image"], "--from an image folder"),
        (["--from", sizes, "--shape", f"3,{SIZE[1]},{SIZE[0]}"], "already have the dataset's shape"),
        (["--from", mixed], "mixes PNG and JPEG"),
        (
            ["--from", photo_folder(tmp_path / "big", "jpg", ("RGB",)), "--shape", "3,8,8"],
            "already have the dataset's shape",
        ),
    ]


def test_what_source_cannot_keep_is_one_line_and_leaves_nothing(tmp_path, cli):
    for args, fragment in refusals(tmp_path):
        out = tmp_path / "data"
        r = cli("prepare", *args, "--formats", "npy,files", "--files-encoding", "source", "--data-dir", out, "-q")
        assert r.code == 2 and fragment in r.err and len(r.err.strip().splitlines()) == 1, r.err
        assert "Traceback" not in r.err
        assert not out.exists() or not any(out.iterdir()), list(out.rglob("*"))


def test_an_unknown_encoding_is_refused(tmp_path, cli):
    r = cli("prepare", "--size", "10", "--formats", "files", "--files-encoding", "jpeg", "--data-dir", tmp_path, "-q")
    assert r.code == 2 and "auto, png, npy, source or photos" in r.err, r.err
    assert not any(tmp_path.iterdir())
