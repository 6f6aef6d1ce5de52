import io

import lz4.frame
import numpy as np
import pytest
from PIL import Image

from iobench.data.dataset import ContentHasher, generate
from iobench.errors import IobenchError
from iobench.spec import VOCABULARY, DatasetSpec
from iobench.units import parse_shape, parse_size


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1e7", 10**7),
        ("10000000", 10**7),
        ("10_000_000", 10**7),
        ("10M", 10**7),
        ("10m", 10**7),
        ("2.5k", 2500),
        ("1G", 10**9),
        (" 100 ", 100),
        ("1.5e3", 1500),
    ],
)
def test_parse_size_accepts_the_documented_spellings(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["0", "-5", "abc", "", "1e-3", "1.5", "10X", "inf", "nan", "1e400"])
def test_parse_size_rejects_nonsense(text):
    with pytest.raises(IobenchError):
        parse_size(text)


@pytest.mark.parametrize("text, expected", [("128", (128,)), ("3,32,32", (3, 32, 32)), ("3x32x32", (3, 32, 32))])
def test_parse_shape(text, expected):
    assert parse_shape(text) == expected


@pytest.mark.parametrize("text", ["", "0", "3,-1", "a,b", "3,,x"])
def test_parse_shape_rejects_nonsense(text):
    with pytest.raises(IobenchError):
        parse_shape(text)


def test_spec_rejects_bad_dtype_and_classes():
    with pytest.raises(IobenchError, match="dtype"):
        DatasetSpec(10, dtype="complex64")
    with pytest.raises(IobenchError, match="classes"):
        DatasetSpec(10, n_classes=0)


def test_default_sample_is_128_float32_plus_int64_label():
    spec = DatasetSpec(10**7)
    assert spec.sample_bytes == 128 * 4 + 8
    assert 5.1e9 < spec.payload_bytes < 5.3e9


@pytest.mark.parametrize(
    "shape, dtype", [((128,), "float32"), ((3, 8, 8), "uint8"), ((5,), "float16"), ((4,), "int64")]
)
def test_generation_is_deterministic_bounded_and_range_independent(small_chunks, shape, dtype):
    spec = DatasetSpec(1000, shape=shape, dtype=dtype, n_classes=7, seed=3)
    chunks = list(generate(spec))
    assert len(chunks) > 2, "the fixture should force several chunks"
    assert all(len(c.labels) <= spec.chunk_rows for c in chunks)
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)
    features = np.concatenate([c.features for c in chunks])
    labels = np.concatenate([c.labels for c in chunks])
    assert features.shape == (1000, *shape) and features.dtype == np.dtype(dtype)
    assert labels.min() >= 0 and labels.max() < 7
    # Any sub-range regenerates identically, without generating what comes before it.
    part = list(generate(spec, 333, 777))
    np.testing.assert_array_equal(np.concatenate([c.features for c in part]), features[333:777])
    np.testing.assert_array_equal(np.concatenate([c.labels for c in part]), labels[333:777])
    again = np.concatenate([c.features for c in generate(spec)])
    np.testing.assert_array_equal(again, features)


def test_seed_changes_content():
    a = next(generate(DatasetSpec(100, seed=0))).features
    b = next(generate(DatasetSpec(100, seed=1))).features
    assert not np.array_equal(a, b)


def test_content_hash_is_independent_of_chunking():
    spec = DatasetSpec(500, shape=(4,))
    whole = next(generate(spec))
    h1, h2 = ContentHasher(), ContentHasher()
    h1.update(whole.features, whole.labels)
    for a in range(0, 500, 77):
        h2.update(whole.features[a : a + 77], whole.labels[a : a + 77])
    assert h1.digest() == h2.digest()
    h3 = ContentHasher()
    flipped = whole.features.copy()
    flipped[10, 0] += 1
    h3.update(flipped, whole.labels)
    assert h3.digest()["features"] != h1.digest()["features"]


def _png_bytes(image_chw):
    out = io.BytesIO()
    Image.fromarray(np.moveaxis(image_chw, 0, -1)).save(out, format="PNG")
    return len(out.getvalue())


def test_photo_content_compresses_like_photos_and_random_content_does_not():
    """A compressor on random bytes measures nothing: generated images must carry a photo's structure.
    Real photos (scikit-image's samples, measured for the README): PNG 1.3-2.2x, lz4 about 1.0x."""
    photos = next(generate(DatasetSpec(64, (3, 64, 64), "uint8", content="photo"))).features
    noise = next(generate(DatasetSpec(64, (3, 64, 64), "uint8"))).features
    png_ratio = photos.nbytes / sum(_png_bytes(p) for p in photos)
    assert 1.2 < png_ratio < 3.0
    assert photos.nbytes / sum(len(lz4.frame.compress(p.tobytes())) for p in photos) < 1.2
    assert noise.nbytes / sum(_png_bytes(p) for p in noise) < 1.01
    # smooth: neighbouring pixels are close (noise: about 85 levels apart on average)
    assert np.abs(np.diff(photos.astype(int), axis=-1)).mean() < 15


def test_token_content_stays_in_the_vocabulary():
    tokens = next(generate(DatasetSpec(20, (2048,), "int32", content="tokens"))).features
    assert tokens.min() >= 0 and tokens.max() < VOCABULARY and tokens.max() > VOCABULARY // 2


@pytest.mark.parametrize(
    "spec",
    [dict(shape=(128,), dtype="uint8", content="photo"), dict(shape=(16,), dtype="float32", content="tokens")],
)
def test_content_that_the_shape_cannot_hold_is_refused(spec):
    with pytest.raises(IobenchError, match="content needs"):
        DatasetSpec(10, **spec)


def test_manifests_without_content_read_as_random():
    d = DatasetSpec(10).to_json()
    del d["content"]
    assert DatasetSpec.from_json(d) == DatasetSpec(10)
    assert "photo" in DatasetSpec(10, (3, 8, 8), "uint8", content="photo").name
