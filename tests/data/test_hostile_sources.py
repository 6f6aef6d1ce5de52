"""`prepare --from` someone else's data (the second hostile probe): a source is never written, never a
way to read another file, never deleted by the dataset it feeds, and a damaged one is one line with
nothing left behind."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from PIL import Image
from tensordict import TensorDict

from tests.conftest import ROOT, assert_one_line_error, invoke, run_subprocess

pytestmark = pytest.mark.hostile

N = 100
FEATURES = np.arange(N * 16, dtype=np.float32).reshape(N, 16)
LABELS = np.arange(N) % 10
SECRET = b"root:x:0:0:secret-outside-the-source\n" * 64


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _nothing_written(data_dir: Path) -> bool:
    return not data_dir.exists() or not any(data_dir.iterdir())


@pytest.fixture
def td_source(tmp_path):
    folder = tmp_path / "td"
    TensorDict(features=torch.from_numpy(FEATURES), labels=torch.from_numpy(LABELS), batch_size=[N]).memmap(folder)
    return folder


def _declare(folder: Path, key: str, shape: list[int]) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    meta[key]["shape"] = shape
    (folder / "meta.json").write_text(json.dumps(meta))


def test_a_tensordict_source_that_declares_more_rows_is_refused_and_left_as_it_was(td_source, tmp_path, cli):
    """tensordict's load_memmap grew the file to 64 MB and zeroed byte 0; rc 0."""
    _declare(td_source, "features", [1_000_000, 16])
    before = _snapshot(td_source)
    r = cli("prepare", "--from", td_source, "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    assert_one_line_error(r, "shorter than")
    assert _snapshot(td_source) == before
    assert _nothing_written(tmp_path / "data")


def test_a_link_inside_a_tensordict_source_is_never_followed_nor_written(td_source, tmp_path, cli):
    """features.memmap as a link to a read-only victim: the victim grew from 17 B to 409,600 B."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"seventeen bytes!\n")
    victim.chmod(0o444)  # root ignores the mode: only iobench's own care protects it
    (td_source / "features.memmap").unlink()
    (td_source / "features.memmap").symlink_to(victim)
    _declare(td_source, "features", [6400, 16])
    r = cli("prepare", "--from", td_source, "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    assert_one_line_error(r, "--from")
    assert victim.read_bytes() == b"seventeen bytes!\n"
    assert _nothing_written(tmp_path / "data")


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"_type": "<class 'evil.Thing'>"}, "does not describe a TensorDict"),
        ({"features": {"shape": [N, 16], "dtype": "torch.object"}}, "not supported"),
        ({"features": {"shape": [N, "16"], "dtype": "torch.float32"}}, "not a list of sizes"),
        ({"features": "not an entry"}, "need 'features'"),
    ],
)
def test_a_tensordict_meta_json_that_lies_is_one_line(td_source, tmp_path, cli, change, fragment):
    meta = json.loads((td_source / "meta.json").read_text())
    (td_source / "meta.json").write_text(json.dumps({**meta, **change}))
    r = cli("prepare", "--from", td_source, "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    assert_one_line_error(r, fragment)


def test_a_tensordict_source_still_becomes_the_dataset(td_source, tmp_path):
    invoke("prepare", "--from", td_source, "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    (dataset,) = (tmp_path / "data").iterdir()
    assert np.array_equal(np.load(dataset / "npy/features.npy"), FEATURES)
    assert np.array_equal(np.load(dataset / "npy/labels.npy"), LABELS)


def _hdf5_reaching_out(path: Path, outside: Path, kind: str) -> str:
    """An HDF5 file whose dataset `features` reads `outside` (or loops); returns the name to give."""
    rows = len(SECRET) // 16
    with h5py.File(path, "w") as f:
        if kind == "external-storage":
            f.create_dataset("features", (rows, 16), dtype="u1", external=[(str(outside), 0, rows * 16)])
        elif kind == "external-storage-relative":
            rel = os.path.relpath(outside, path.parent)
            f.create_dataset("features", (rows, 16), dtype="u1", external=[(rel, 0, rows * 16)])
        elif kind == "external-link":
            with h5py.File(outside.with_suffix(".h5"), "w") as g:
                g["data"] = np.frombuffer(SECRET, dtype="u1").reshape(rows, 16)
            f["features"] = h5py.ExternalLink(str(outside.with_suffix(".h5")), "/data")
        elif kind == "virtual":
            with h5py.File(outside.with_suffix(".h5"), "w") as g:
                g["data"] = np.frombuffer(SECRET, dtype="u1").reshape(rows, 16)
            layout = h5py.VirtualLayout(shape=(rows, 16), dtype="u1")
            layout[:] = h5py.VirtualSource(str(outside.with_suffix(".h5")), "data", shape=(rows, 16))
            f.create_virtual_dataset("features", layout)
        elif kind == "virtual-missing":
            layout = h5py.VirtualLayout(shape=(rows, 16), dtype="u1")
            layout[:] = h5py.VirtualSource(str(outside.with_name("absent.h5")), "data", shape=(rows, 16))
            f.create_virtual_dataset("features", layout, fillvalue=7)
        elif kind == "soft-link-loop":
            f["a"] = h5py.SoftLink("/features")
            f["features"] = h5py.SoftLink("/a")
    return "features"


@pytest.mark.parametrize(
    "kind",
    ["external-storage", "external-storage-relative", "external-link", "virtual", "virtual-missing", "soft-link-loop"],
)
def test_an_hdf5_source_never_reads_another_file(tmp_path, cli, kind):
    """external storage imported /etc/passwd verbatim; a virtual dataset with a missing source gave
    fill values with rc 0; a soft-link loop was a traceback (D6)."""
    outside = tmp_path / "elsewhere" / "secret.bin"
    outside.parent.mkdir()
    outside.write_bytes(SECRET)
    source = tmp_path / "src" / "f.h5"
    source.parent.mkdir()
    name = _hdf5_reaching_out(source, outside, kind)
    r = cli("prepare", "--from", f"{source}:{name}", "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    assert_one_line_error(r, "--from")
    assert _nothing_written(tmp_path / "data")


def test_a_prepared_hdf5_file_with_external_storage_is_refused(tmp_path, cli):
    """The same rule for a prepared dataset from someone else: data.h5 must hold its own bytes."""
    invoke("prepare", "--size", N, "--shape", "16", "--formats", "hdf5", "--data-dir", tmp_path / "data", "-q")
    (dataset,) = (tmp_path / "data").iterdir()
    outside = tmp_path / "secret.bin"
    outside.write_bytes(np.zeros(N * 16, np.float32).tobytes())
    with h5py.File(dataset / "hdf5/data.h5", "a") as f:
        del f["features"]
        f.create_dataset("features", (N, 16), dtype="<f4", external=[(str(outside), 0, N * 64)])
    manifest = json.loads((dataset / "manifest.json").read_text())  # a hostile dataset vouches for itself
    (entry,) = manifest["formats"]["hdf5"]["files"]
    entry["bytes"] = (dataset / "hdf5/data.h5").stat().st_size
    entry["sha256"] = hashlib.sha256((dataset / "hdf5/data.h5").read_bytes()).hexdigest()
    (dataset / "manifest.json").write_text(json.dumps(manifest))
    r = cli("run", "--data-dir", tmp_path / "data", "--format", "hdf5", "--results", tmp_path / "r.jsonl")
    assert r.code == 2 and "external storage" in r.err, r.err


def test_a_forced_prepare_from_inside_the_dataset_it_replaces_deletes_nothing(tmp_path, cli):
    """--force deleted every format, the source included, then failed 'No such file'."""
    data = tmp_path / "data"
    invoke("prepare", "--size", N, "--shape", "16", "--formats", "npy,hdf5", "--data-dir", data, "--dataset", "X", "-q")
    before = _snapshot(data / "X")
    npy = data / "X" / "npy"
    r = cli(
        "prepare",
        "--from",
        npy / "features.npy",
        "--labels",
        npy / "labels.npy",
        "--data-dir",
        data,
        "--dataset",
        "X",
        "--formats",
        "npy",
        "--force",
        "-q",
    )
    assert_one_line_error(r, "inside the dataset being written")
    assert _snapshot(data / "X") == before
    # through a link to the dataset folder too: real paths are compared
    (tmp_path / "alias").symlink_to(data / "X")
    r = cli(
        "prepare",
        "--from",
        tmp_path / "alias/npy/features.npy",
        "--data-dir",
        data,
        "--dataset",
        "X",
        "--formats",
        "npy",
        "--force",
        "-q",
    )
    assert_one_line_error(r, "inside the dataset being written")
    assert _snapshot(data / "X") == before


def _png(path: Path, size=(8, 8), color=(200, 10, 10)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)


def _photos(root: Path) -> Path:
    for label in ("a", "b"):
        for i in range(3):
            _png(root / label / f"{i}.png")
    return root


def _jpeg_bytes() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (1, 2, 3)).save(buf, "JPEG")
    return buf.getvalue()


@pytest.mark.parametrize(
    ("bad", "content"),
    [
        ("truncated.jpg", _jpeg_bytes()[:200]),
        ("empty.png", b""),
        ("text.png", b"this is not an image\n"),
    ],
)
def test_an_unreadable_image_is_one_line_naming_it_and_nothing_is_left(tmp_path, cli, bad, content):
    """a traceback, and a dataset folder with an empty manifest left behind."""
    source = _photos(tmp_path / "photos")
    (source / "b" / bad).write_bytes(content)
    r = cli("prepare", "--from", source, "--shape", "3,8,8", "--data-dir", tmp_path / "data", "-q")
    assert_one_line_error(r, bad)
    assert _nothing_written(tmp_path / "data")


def test_a_short_archive_member_is_one_line_and_nothing_is_left(tmp_path, cli):
    """an npz member whose data is shorter than its header says fails while writing."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (N, 16)})
    with zipfile.ZipFile(tmp_path / "short.npz", "w") as z:
        z.writestr("features.npy", header.getvalue() + FEATURES[: N // 2].tobytes())
    r = cli("prepare", "--from", tmp_path / "short.npz", "--data-dir", tmp_path / "data", "-q")
    assert_one_line_error(r, "shorter than its header")
    assert _nothing_written(tmp_path / "data")


def test_a_linked_class_folder_is_refused_not_crawled(tmp_path, cli):
    """a class folder linked to /usr was crawled recursively (4,938 files)."""
    source = _photos(tmp_path / "photos")
    elsewhere = _photos(tmp_path / "elsewhere")
    (source / "c").symlink_to(elsewhere / "a")
    r = cli("prepare", "--from", source, "--shape", "3,8,8", "--data-dir", tmp_path / "data", "-q")
    assert_one_line_error(r, "is a link")
    (source / "c").unlink()
    (source / "b" / "linked.png").symlink_to(elsewhere / "a" / "0.png")
    r = cli("prepare", "--from", source, "--shape", "3,8,8", "--data-dir", tmp_path / "data", "-q")
    assert_one_line_error(r, "is a link")
    assert _nothing_written(tmp_path / "data")


def test_an_empty_class_folder_is_refused_rather_than_shifting_labels(tmp_path, cli):
    source = _photos(tmp_path / "photos")
    (source / "a0_empty").mkdir()
    r = cli("prepare", "--from", source, "--shape", "3,8,8", "--data-dir", tmp_path / "data", "-q")
    assert_one_line_error(r, "'a0_empty' holds no PNG or JPEG")


def _peak_rss_mb(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run `iobench ARGS` in a child and return it with the child's peak RSS in MB."""
    code = (
        "import resource, subprocess, sys; "
        "r = subprocess.run([sys.executable, '-m', 'iobench', *sys.argv[1:]], capture_output=True, text=True); "
        "sys.stderr.write(r.stderr); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    return done, int(done.stdout.strip().splitlines()[-1]) / 1024


# What `iobench prepare` costs by itself (torch, numpy): the bombs below cost 1-4 GB before the fixes.
RSS_BOUND_MB = 900


def _bomb(path: Path, members: dict[str, tuple[np.ndarray, tuple[int, ...], int]]) -> None:
    """An npz whose members declare `shape` and hold a prefix array plus `zeros` zero bytes, written
    in pieces (deflated zeros: about 1 MB per GB)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, (head, shape, zeros) in members.items():
            header = io.BytesIO()
            descr = np.lib.format.dtype_to_descr(head.dtype)
            np.lib.format.write_array_header_1_0(header, {"descr": descr, "fortran_order": False, "shape": shape})
            with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                f.write(header.getvalue() + head.tobytes())
                piece = bytes(2**24)
                for start in range(0, zeros, len(piece)):
                    f.write(piece[: min(len(piece), zeros - start)])


def test_npz_labels_are_checked_before_they_are_read(tmp_path):
    """a member declaring 2^40 labels was read whole before the length check (2.4 GB of RSS);
    here it inflates to 1 GiB."""
    _bomb(tmp_path / "bomb.npz", {"features": (FEATURES, FEATURES.shape, 0), "labels": (LABELS, (2**40,), 2**30)})
    assert (tmp_path / "bomb.npz").stat().st_size < 8 * 2**20
    done, rss = _peak_rss_mb("prepare", "--from", tmp_path / "bomb.npz", "--data-dir", tmp_path / "data", "-q")
    assert done.stderr.count("\n") == 1 and "labels" in done.stderr, done.stderr
    assert rss < RSS_BOUND_MB, rss


@pytest.mark.long
def test_deflated_labels_are_streamed_not_inflated_whole(tmp_path):
    """a 1.9 MB zip of labels that inflates to gigabytes reached 4.2 GB of RSS. Here 1 GiB of
    labels (a negative one first, so that the check refuses them; it reads them all before it does)."""
    n = 2**27
    negative = np.array([-1], np.int64)
    _bomb(
        tmp_path / "bomb.npz",
        {"features": (np.zeros(0, np.uint8), (n, 1), n), "labels": (negative, (n,), (n - 1) * 8)},
    )
    assert (tmp_path / "bomb.npz").stat().st_size < 8 * 2**20
    done, rss = _peak_rss_mb("prepare", "--from", tmp_path / "bomb.npz", "--data-dir", tmp_path / "data", "-q")
    assert "labels must be >= 0" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert rss < RSS_BOUND_MB, rss


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


@pytest.mark.long
def test_a_huge_image_is_refused_from_its_header(tmp_path):
    """a 13000x13000 PNG of about 20 KB cost 0.8-1.3 GB per decoding thread."""
    source = _photos(tmp_path / "photos")
    Image.new("1", (13000, 13000)).save(source / "b" / "huge.png")
    assert (source / "b" / "huge.png").stat().st_size < 2**20
    done, rss = _peak_rss_mb("prepare", "--from", source, "--shape", "3,8,8", "--data-dir", tmp_path / "data", "-q")
    assert "huge.png" in done.stderr and "pixels" in done.stderr, done.stderr
    assert rss < RSS_BOUND_MB, rss
    assert _nothing_written(tmp_path / "data")


def test_a_source_is_not_a_fifo_to_wait_on(tmp_path):
    """open() of a FIFO blocks forever; a source file is refused unless it is a regular file
    (in a child with a timeout, so that a regression fails instead of hanging the suite)."""
    os.mkfifo(tmp_path / "labels.npy")
    np.save(tmp_path / "x.npy", FEATURES)
    args = ("prepare", "--from", tmp_path / "x.npy", "--labels", tmp_path / "labels.npy", "--data-dir", tmp_path / "d")
    done = run_subprocess(*args, "-q", timeout=60)
    assert done.returncode == 2 and "not a regular file" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1


def test_a_header_that_declares_exabytes_is_refused_as_short_not_as_a_disk_to_buy(tmp_path, cli):
    """It was reported as "need 309,905,300,438 GB" of disk space (the row size overflowed int64)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (2, 2**32, 2**32)})
    (tmp_path / "x.npy").write_bytes(header.getvalue() + bytes(100))
    r = cli("prepare", "--from", tmp_path / "x.npy", "--data-dir", tmp_path / "data", "-q")
    assert_one_line_error(r, "shorter than")


@pytest.mark.parametrize("folder", ["im\nages", "a b#c", "..hidden", "\n"])
def test_a_source_folders_odd_name_becomes_a_plain_dataset_name(tmp_path, cli, folder):
    """`--from` a folder named with a newline made a dataset (and every record's `dataset`) named so."""
    source = tmp_path / "src" / folder
    for i in range(4):
        _png(source / "a" / f"{i}.png", color=(i * 50, 0, 0))
    r = cli("prepare", "--from", source, "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    assert r.code == 0, r.err
    (dataset,) = (tmp_path / "data").iterdir()
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", dataset.name), dataset.name
    assert r.out.count("\n") == len(r.out.splitlines()) and f"manifest: {dataset}/manifest.json" in r.out
