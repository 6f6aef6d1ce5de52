"""prepare --from: the user's own data becomes every format, equal to the source as the formats' own
libraries read it back (no iobench code on the reading side); bad sources are one line, nothing written."""

from __future__ import annotations

import json
import struct

import h5py
import lmdb
import lz4.frame
import numpy as np
import pytest
import torch
from PIL import Image
from tensordict import TensorDict

from tests.conftest import assert_one_line_error, invoke

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

N = 300
FEATURES = np.random.default_rng(3).random((N, 2, 5), dtype=np.float32)
LABELS = np.random.default_rng(4).integers(0, 9, N)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    np.save(root / "x.npy", FEATURES)
    np.save(root / "y.npy", LABELS)
    np.savez(root / "stored.npz", x=FEATURES, y=LABELS)
    np.savez_compressed(root / "deflated.npz", features=FEATURES, labels=LABELS)
    with h5py.File(root / "f.h5", "w") as f:
        f["features"], f["labels"] = FEATURES, LABELS
    td = TensorDict(features=torch.from_numpy(FEATURES), labels=torch.from_numpy(LABELS), batch_size=[N])
    td.memmap(root / "td")
    return root


def _read_back(dataset):
    """Each format read with its own library: numpy, h5py, lmdb+lz4, tensordict."""
    npy = np.load(dataset / "npy/features.npy"), np.load(dataset / "npy/labels.npy")
    with h5py.File(dataset / "hdf5/data.h5") as f:
        hdf5 = f["features"][:], f["labels"][:]
    td = TensorDict.load_memmap(dataset / "memmap", allow_pickle=False)
    memmap = td["features"].numpy(), td["labels"].numpy()
    env = lmdb.open(str(dataset / "lmdb"), readonly=True, lock=False)
    with env.begin() as txn:
        features, labels = [], []
        for record in range(N):  # one sample per record: int64 label, then the features
            raw = lz4.frame.decompress(txn.get(struct.pack(">Q", record)))
            labels.append(np.frombuffer(raw[:8], "<i8")[0])
            features.append(np.frombuffer(raw[8:], "<f4").reshape(2, 5))
    env.close()
    files = (
        np.stack([np.load(dataset / f"files/samples/0/{i:03d}.npy") for i in range(N)]),
        np.load(dataset / "files/labels.npy"),
    )
    return {"npy": npy, "hdf5": hdf5, "memmap": memmap, "lmdb": (np.stack(features), np.array(labels)), "files": files}


@pytest.mark.parametrize(
    "args",
    [
        ["x.npy", "--labels", "y.npy"],
        ["stored.npz", "--features-key", "x", "--labels-key", "y"],
        ["deflated.npz"],
        ["f.h5:features", "--labels", "f.h5:labels"],
        ["td"],
    ],
    ids=["npy", "npz-stored", "npz-deflated", "hdf5", "tensordict"],
)
def test_every_format_equals_the_source(sources, tmp_path, args):
    source_args = [
        str(sources / a) if a.split(":")[0].endswith((".npy", ".npz", ".h5")) or a == "td" else a for a in args
    ]
    invoke("prepare", "--from", *source_args, "--formats", "all", "--data-dir", tmp_path, "-q")
    (dataset,) = tmp_path.iterdir()
    for name, (features, labels) in _read_back(dataset).items():
        np.testing.assert_array_equal(features, FEATURES, err_msg=name)
        np.testing.assert_array_equal(labels, LABELS, err_msg=name)
    spec = json.loads((dataset / "manifest.json").read_text())["spec"]
    assert spec["source"]["path"].startswith(str(sources)) and spec["n_classes"] == LABELS.max() + 1
    assert spec["source"]["bytes"] > 0 and spec["source"]["mtime"] > 0
    invoke("verify", "--data-dir", tmp_path, "-q")


def test_without_labels_every_label_is_zero_and_recorded_so(sources, tmp_path):
    invoke("prepare", "--from", sources / "x.npy", "--formats", "npy", "--data-dir", tmp_path, "-q")
    (dataset,) = tmp_path.iterdir()
    assert not np.load(dataset / "npy/labels.npy").any()
    spec = json.loads((dataset / "manifest.json").read_text())["spec"]
    assert spec["source"]["labels"] == "" and spec["n_classes"] == 1


def test_an_image_folder_becomes_a_dataset(tmp_path):
    """Class sub-folders in sorted order; PNG and JPEG of other sizes resized and centre-cropped."""
    rng = np.random.default_rng(0)
    sizes = {"cat": [(40, 30), (30, 50)], "dog": [(64, 64)], "ant": [(33, 17)]}
    for name, shapes in sizes.items():
        (tmp_path / "photos" / name).mkdir(parents=True)
        for k, (w, h) in enumerate(shapes):
            image = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
            image.save(tmp_path / "photos" / name / (f"{k}.png" if k % 2 == 0 else f"{k}.JPG"))
    (tmp_path / "photos" / "notes.txt").write_text("not a class")
    out = tmp_path / "data"
    invoke("prepare", "--from", tmp_path / "photos", "--shape", "3,16,16", "--formats", "npy,files", "--data-dir", out)
    (dataset,) = out.iterdir()
    features, labels = np.load(dataset / "npy/features.npy"), np.load(dataset / "npy/labels.npy")
    assert features.shape == (4, 3, 16, 16) and features.dtype == np.uint8
    np.testing.assert_array_equal(labels, [0, 1, 1, 2])  # ant, cat, cat, dog
    kept = ["ant/0.png", "cat/0.png", "cat/1.JPG", "dog/0.png"]  # files keeps each photo byte for byte, in order
    for i, name in enumerate(kept):
        assert (dataset / f"files/samples/0/{i}.img").read_bytes() == (tmp_path / "photos" / name).read_bytes()
    assert json.loads((dataset / "manifest.json").read_text())["formats"]["files"]["options"]["encoding"] == "photos"
    # the 64x64 photo scaled to 16x16 keeps its average colour
    dog = np.asarray(Image.open(tmp_path / "photos/dog/0.png"), dtype=float).mean(axis=(0, 1))
    np.testing.assert_allclose(features[3].mean(axis=(1, 2)), dog, atol=3)


def test_an_image_folder_needs_no_shape_of_one_size_or_of_several(tmp_path, cli):
    """--shape was required even when every image had the same size; the headers say it. Photos of several sizes
    (as people keep them) get the training size 3,224,224, resized and centre-cropped."""
    for name, mode in (("cat", "RGB"), ("dog", "RGB")):
        (tmp_path / "one" / name).mkdir(parents=True)
        for k in range(2):
            Image.new(mode, (20, 12), (k, 2, 3)).save(tmp_path / "one" / name / f"{k}.png")
    r = cli("prepare", "--from", tmp_path / "one", "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    assert r.code == 0, r.err
    (dataset,) = (tmp_path / "data").iterdir()
    assert np.load(dataset / "npy/features.npy").shape == (4, 3, 12, 20)
    Image.new("L", (20, 12)).save(tmp_path / "one" / "dog" / "grey.png")
    Image.new("RGB", (8, 8)).save(tmp_path / "one" / "dog" / "small.png")
    r = cli("prepare", "--from", tmp_path / "one", "--formats", "npy", "--data-dir", tmp_path / "other", "-q")
    assert r.code == 0, r.err
    (dataset,) = (tmp_path / "other").iterdir()
    assert np.load(dataset / "npy/features.npy", mmap_mode="r").shape == (6, 3, 224, 224)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["nope.npy"], "no such file or folder"),
        (["x.npy", "--labels", "short.npy"], "300 samples but 10 labels"),
        (["objects.npy"], "cannot read it"),
        (["complex.npy"], "dtype complex64 are not supported"),
        (["x.npy", "--labels", "float_labels.npy"], "labels must be integers"),
        (["x.npy", "--labels", "negative.npy"], "labels must be >= 0"),
        (["stored.npz", "--features-key", "q"], "no array 'q'"),
        (["f.h5"], "name the dataset inside the file"),
        (["f.h5:missing"], "no dataset 'missing'"),
        (["x.npy", "--size", "10"], "drop --size"),
        (["empty_folder"], "no PNG or JPEG files"),
        (["empty_folder", "--shape", "3,8,8"], "no PNG or JPEG files"),
        (["hostname.txt"], "unsupported source"),
    ],
)
def test_a_bad_source_is_one_line_and_nothing_is_written(sources, tmp_path, cli, args, fragment):
    np.save(sources / "short.npy", LABELS[:10])
    np.save(sources / "objects.npy", np.array([{"a": 1}] * 3, dtype=object), allow_pickle=True)
    np.save(sources / "complex.npy", FEATURES.astype(np.complex64))
    np.save(sources / "float_labels.npy", LABELS.astype(np.float32))
    np.save(sources / "negative.npy", LABELS - 1)
    (sources / "empty_folder" / "class").mkdir(parents=True, exist_ok=True)
    (sources / "hostname.txt").write_text("x")
    first, *rest = args
    flags = [str(sources / a) if a.endswith(".npy") else a for a in rest]
    r = cli("prepare", "--from", sources / first, *flags, "--data-dir", tmp_path / "out", "-q")
    assert_one_line_error(r, fragment)
    assert not (tmp_path / "out").exists()


def test_relative_label_paths_are_recorded_absolute(sources, monkeypatch):
    """The writers (a forked process, a later verify) must find the labels wherever they run from."""
    from iobench.data.spec_options import SpecOptions, build_spec

    monkeypatch.chdir(sources)
    spec = build_spec(SpecOptions(source="f.h5:features", labels="f.h5:labels"))
    assert spec.source.labels == f"{sources / 'f.h5'}:labels" and spec.source.path == str(sources / "f.h5")
    spec = build_spec(SpecOptions(source="x.npy", labels="y.npy"))
    assert spec.source.labels == str(sources / "y.npy") and spec.n_classes == LABELS.max() + 1
