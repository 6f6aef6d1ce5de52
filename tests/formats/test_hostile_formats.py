"""The third probe: what the new formats' libraries do with the paths and bytes iobench hands them. A path
never becomes a URL, a pattern or a command; a library reads only what was checked; a hostile file is one
line, never a hang, an OOM kill or a traceback. Datasets are damaged with the manifest made to vouch for
them (whoever ships a dataset controls its manifest too)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from iobench.errors import IobenchError
from iobench.formats import FORMATS
from tests.conftest import (
    NEEDS_TORCHDATA,
    assert_one_line_error,
    console_script,
    format_param,
    invoke,
    needs_module,
    planted,
    resolved_run,
    run_beside_a_fifo,
    run_subprocess,
    run_with_peak_memory,
    stored_records,
)

pytestmark = [pytest.mark.hostile, pytest.mark.extras]

NEW = ("webdataset", "arrow", "zarr", "tfrecord", "litdata")
N = 200


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """Small images (8x8x3 uint8: PNG in the shard formats) in every new format whose library is installed."""
    root = tmp_path_factory.mktemp("hostile-formats")
    wanted = ",".join(["npy", *(n for n in NEW if FORMATS.installed(n))])
    invoke(
        "prepare",
        "--size",
        N,
        "--shape",
        "8,8,3",
        "--dtype",
        "uint8",
        "--data-dir",
        root / "data",
        "-q",
        "--formats",
        wanted,
    )
    invoke("limits", "--data-dir", root / "data", "--results", root / "r.jsonl", "--probe-size", "16M")
    return next((root / "data").iterdir())


@pytest.fixture
def results(clean, request):
    """A results file of its own beside the limits measured once for the module."""
    return clean.parent.parent / f"{request.node.name}.jsonl"


def rewrite_manifest(dataset: Path, fmt: str) -> None:
    """The manifest made to vouch for whatever the format's folder now holds."""
    path = dataset / "manifest.json"
    manifest = json.loads(path.read_text())
    entry = manifest["formats"][fmt]
    folder = dataset / entry["directory"]
    entry["files"] = [
        {
            "path": p.relative_to(folder).as_posix(),
            "bytes": p.stat().st_size,
            "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
        }
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    ]
    path.write_text(json.dumps(manifest))


def run_args(data_dir: Path | str, fmt: str, loader: str, results: Path, *extra: str) -> list:
    return [
        "run",
        "--data-dir",
        data_dir,
        "--dataset",
        "ds",
        "--format",
        fmt,
        "--loader",
        loader,
        "--runs",
        "1",
        "--epochs",
        "1",
        "--device",
        "cpu",
        "--results",
        results,
        "--batch-size",
        "16",
        "-q",
        *extra,
    ]


# N1: a data folder's name is handed to no library as a URL, a pattern or a command. Relative, as the probe
# gave it: `pipe:touch X;echo /ds/webdataset/shard-000000.tar` is what webdataset's opener ran.
HOSTILE_NAMES = {
    "pipe": "pipe:touch {marker};echo ",
    "hash": "p#q",
    "query": "p?q",
    "braces": "p{}q",
    "newline": "p\nq",
    "fsspec-chain": "a::b",
}


@pytest.mark.parametrize(("name", "kind"), [format_param(f, kind) for f in NEW for kind in HOSTILE_NAMES])
def test_a_folder_name_is_never_a_url_pattern_or_command(clean, results, tmp_path, monkeypatch, cli, name, kind):
    marker = tmp_path / "RAN"
    folder = HOSTILE_NAMES[kind].replace("{marker}", str(marker))
    monkeypatch.chdir(tmp_path)
    shutil.copytree(clean, Path(folder) / "ds")
    r = cli(*run_args(folder, name, "native", results))
    assert r.code == 0, r.err
    assert not marker.exists(), "a shell ran a command made of the folder's name"
    (record,) = stored_records(results)
    assert record["samples_per_epoch"] == N and record["shuffle_spread"] > 0


@pytest.mark.long
@pytest.mark.parametrize("kind", list(HOSTILE_NAMES))
def test_every_writer_and_reader_takes_a_folder_name_as_a_path(tmp_path, monkeypatch, cli, kind):
    """a data folder named like a URL or a command reaches no writer (`prepare`: webdataset's ShardWriter ran
    `pipe:` as a shell) and no reader (`verify` reads every file of every format; `run` every format by index)."""
    marker = tmp_path / "RAN"
    folder = HOSTILE_NAMES[kind].replace("{marker}", str(marker))
    monkeypatch.chdir(tmp_path)
    Path(folder).mkdir(parents=True)
    installed = [name for name in FORMATS if FORMATS.installed(name)]
    r = cli(
        "prepare",
        "--size",
        40,
        "--shape",
        "4,4,3",
        "--dtype",
        "uint8",
        "--formats",
        ",".join(installed),
        "--data-dir",
        folder,
        "--dataset",
        "ds",
        "-q",
    )
    assert r.code == 0, r.err
    assert not marker.exists(), "a shell ran a command made of the folder's name"
    assert sorted(p.name for p in (Path(folder) / "ds").iterdir()) == sorted([*installed, "manifest.json"])
    r = cli("verify", "--data-dir", folder, "-q")
    assert r.code == 0 and r.out.count(" OK ") == len(installed), r.out + r.err
    r = cli(*run_args(folder, ",".join(installed), "dataloader", tmp_path / "r.jsonl"))
    assert r.code == 0, r.err
    assert not marker.exists()
    assert sorted(rec["format"] for rec in stored_records(tmp_path / "r.jsonl")) == sorted(installed)


# N6: a data file swapped for a FIFO after the run's checks blocked open() forever (webdataset, tfrecord, zarr)
DATA_FILE = {
    "webdataset": "webdataset/shard-000000.tar",
    "tfrecord": "tfrecord/shard-000000.tfrecord",
    "zarr": "zarr/features/c/0/0/0/0",
    "arrow": "arrow/data-00000-of-00001.arrow",
    "litdata": "litdata/chunk-0-0.bin",
}


@pytest.mark.parametrize(("name", "loader"), [format_param(f, lo) for f in NEW for lo in ("native", "dataloader")])
def test_a_data_file_swapped_for_a_fifo_mid_run_is_refused_not_waited_on(clean, tmp_path, name, loader):
    dataset = tmp_path / "data" / "ds"
    shutil.copytree(clean, dataset)
    resolved = resolved_run(dataset, name, loader)  # every check has passed: the files are regular now
    error = run_beside_a_fifo(resolved, dataset / DATA_FILE[name])
    assert isinstance(error, IobenchError), error
    assert "Traceback" not in str(error) and "\n" not in str(error)


def zarr_copy(clean: Path, tmp_path: Path) -> Path:
    needs_module("zarr")
    dataset = tmp_path / "data" / "ds"
    shutil.copytree(clean, dataset)
    return dataset


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_zarr_consolidated_metadata_is_refused_not_read(clean, tmp_path, results, cli):
    """zarr reads a group's consolidated metadata instead of the checked arrays' own: a codec outside
    those the writer uses (lzma) was decoded, a shape of 1000 rows read out of bounds."""
    dataset = zarr_copy(clean, tmp_path)
    features = json.loads((dataset / "zarr/features/zarr.json").read_text())
    features["codecs"][0]["configuration"]["codecs"] = [{"name": "bytes"}, {"name": "numcodecs.lzma"}]
    features["shape"][0] = 1000
    edit_json(
        dataset / "zarr/zarr.json",
        lambda group: group.update(
            consolidated_metadata={"kind": "inline", "must_understand": False, "metadata": {"features": features}}
        ),
    )
    rewrite_manifest(dataset, "zarr")
    for loader in ("native", "dataloader"):
        r = cli(*run_args(dataset.parent, "zarr", loader, results))
        assert_one_line_error(r, "consolidated metadata is not read")
    r = cli("verify", "--data-dir", dataset.parent, "-q")
    assert r.code == 1 and "consolidated metadata is not read" in r.out and "Traceback" not in r.out + r.err


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda m: m["chunk_grid"]["configuration"]["chunk_shape"].__setitem__(0, 0), "are not whole samples"),
        (lambda m: m["codecs"][0]["configuration"]["chunk_shape"].__setitem__(0, 1), "the manifest's options give"),
        (lambda m: m.update(chunk_key_encoding={"name": "v2"}), "are not the writer's"),
    ],
    ids=["zero-chunk", "tiny-chunk-grid", "other-keys"],
)
def test_zarr_a_chunk_grid_other_than_the_writers_is_refused_in_one_line(
    clean, tmp_path, results, cli, change, fragment
):
    """a zero chunk size gave ZeroDivisionError; a tiny grid ran 55 s, then FileNotFoundError."""
    dataset = zarr_copy(clean, tmp_path)
    edit_json(dataset / "zarr/features/zarr.json", change)
    rewrite_manifest(dataset, "zarr")
    for loader in ("native", "dataloader"):
        assert_one_line_error(cli(*run_args(dataset.parent, "zarr", loader, results)), fragment)


def zstd_bomb(size: int) -> bytes:
    """A zstd frame that declares and inflates to `size` bytes of zeros in a few bytes per 128 KiB (RLE
    blocks): 4 GiB in 128 KB, as the probe's chunk."""
    block = 2**17
    frame = bytearray(b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + size.to_bytes(8, "little"))  # single segment, 8-byte size
    for start in range(0, size, block):
        n = min(block, size - start)
        last = start + n == size
        frame += (int(last) | 1 << 1 | n << 3).to_bytes(3, "little") + b"\0"  # an RLE block of n zeros
    return bytes(frame)


def test_zarr_a_chunk_that_inflates_past_its_size_is_refused_before_it_is_inflated(clean, tmp_path, results):
    """a 134 KB zstd chunk inflating to 4 GiB was an OOM kill (native, dataloader and verify)."""
    dataset = zarr_copy(clean, tmp_path)
    (dataset / "zarr/labels/c/0").write_bytes(zstd_bomb(4 * 2**30))
    rewrite_manifest(dataset, "zarr")
    for args in (run_args(dataset.parent, "zarr", "native", results), ["verify", "--data-dir", dataset.parent]):
        r, peak = run_with_peak_memory(*args)
        assert peak < 2**30, f"peak RSS {peak / 2**20:,.0f} MiB: the chunk was inflated"
        assert r.code in (1, 2) and "destination buffer too small" in r.err + r.out, (r.code, r.out, r.err)
        assert "Traceback" not in r.err + r.out


def gzip_tar_bomb(size: int) -> bytes:
    """A gzip-compressed tar whose one member declares and holds `size` zero bytes, in about size/1000 bytes:
    after a full flush zlib starts afresh, so every MiB of zeros compresses to the same block, repeated. The
    trailer's CRC is wrong; an inflater reaches it only after the member."""
    import tarfile
    import zlib

    info = tarfile.TarInfo("000.png")
    info.size = size
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = deflate.compress(info.tobuf(format=tarfile.USTAR_FORMAT)) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(bytes(2**20)) + deflate.flush(zlib.Z_FULL_FLUSH)
    return head + block * (size // 2**20) + deflate.flush()


def webdataset_copy(clean: Path, tmp_path: Path) -> Path:
    needs_module("webdataset")
    dataset = tmp_path / "data" / "ds"
    shutil.copytree(clean, dataset)
    return dataset


def rewrite_shard(dataset: Path, edit) -> None:
    """Shard 0 rewritten as ShardWriter writes (pax), its members passed through `edit(name, data)` (None
    drops a member; a (TarInfo, data) pair replaces it)."""
    import io
    import tarfile

    path = dataset / "webdataset/shard-000000.tar"
    with tarfile.open(path) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar]
    out = io.BytesIO()  # headers and data laid down as they are, so that a header may lie about its member
    for member, data in members:
        changed = edit(member, data)
        if changed is not None:
            info, payload = changed
            out.write(info.tobuf(format=tarfile.PAX_FORMAT) + payload + bytes(-len(payload) % 512))
    path.write_bytes(out.getvalue() + bytes(1024))
    rewrite_manifest(dataset, "webdataset")


def _replace(name: str, payload: bytes, size: int | None = None):
    def edit(member, data):
        if member.name != name:
            return member, data
        member.size = len(payload) if size is None else size
        return member, payload

    return edit


def test_webdataset_a_compressed_shard_is_refused_before_it_is_inflated(clean, tmp_path, results):
    """a 2 MB gzip stream holding a 2 GiB member (the probe's: 20 MB, 4 GiB) was inflated whole."""
    dataset = webdataset_copy(clean, tmp_path)
    (dataset / "webdataset/shard-000000.tar").write_bytes(gzip_tar_bomb(2 * 2**30))
    rewrite_manifest(dataset, "webdataset")
    r, peak = run_with_peak_memory(*run_args(dataset.parent, "webdataset", "native", results))
    assert peak < 2**30, f"peak RSS {peak / 2**20:,.0f} MiB: the member was inflated"
    assert r.code == 1 and "a gzip-compressed tar" in r.err and "Traceback" not in r.err, r.err


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (_replace("000.png", b"x" * 100, size=2**32), "a member of 4,294,967,296 bytes"),  # a lying size field
        (_replace("000.cls", b"-3"), "is not a class of the dataset"),  # N14: a negative label
        (_replace("000.cls", b"junk\n" * 40), "is not a class of the dataset"),  # N7: junk, was an empty message
        (_replace("000.png", b"\x89PNG\r\n\x1a\n" + bytes(50)), "sample 000: png: not a readable PNG"),  # N7
        (
            lambda m, d: (
                (m.replace(name=m.name.replace("000.", "999999999.")), d) if m.name.startswith("000.") else (m, d)
            ),
            "not an index of the",
        ),  # N14: an index of 10^9 entered the shuffle score
    ],
    ids=["size-field", "negative-label", "junk-label", "bad-image", "huge-key"],
)
def test_webdataset_a_hostile_member_is_one_line(clean, tmp_path, results, cli, edit, fragment):
    dataset = webdataset_copy(clean, tmp_path)
    rewrite_shard(dataset, edit)
    r = cli(*run_args(dataset.parent, "webdataset", "native", results))
    assert r.code == 1 and fragment in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert "Traceback" not in r.err


def test_webdataset_a_pax_record_that_overrides_a_size_is_refused(clean, tmp_path, results, cli):
    """a pax header gave tarfile.ReadError; a pax `size` would make tarfile read what it says."""
    dataset = webdataset_copy(clean, tmp_path)

    def edit(member, data):
        if member.name == "000.png":
            member.pax_headers = {"size": str(2**32)}
        return member, data

    rewrite_shard(dataset, edit)
    assert b"size=4294967296" in (dataset / "webdataset/shard-000000.tar").read_bytes()  # the lie is in the file
    r = cli(*run_args(dataset.parent, "webdataset", "native", results))
    assert r.code == 1 and "a pax record sets 'size'" in r.err and "Traceback" not in r.err, r.err


def test_litdatas_writer_processes_import_the_running_iobench(tmp_path):
    """`prepare --formats litdata` started `python -m iobench.data.shares`, which imported the working
    directory's `iobench/` (planted code ran; a harmless folder of that name broke the prepare)."""
    needs_module("litdata")
    marker = planted(tmp_path)
    r = subprocess.run(
        [
            console_script(),
            "prepare",
            "--size",
            "3000",
            "--shape",
            "64",
            "--formats",
            "litdata",
            "--format-option",
            "litdata.processes=2",
            "--format-option",
            "litdata.chunk_bytes=64KB",
            "--data-dir",
            tmp_path / "data",
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert not marker.exists(), f"planted code ran: {marker.read_text()}"
    assert json.loads(next((tmp_path / "data").glob("*/litdata/index.json")).read_text())["chunks"]


def arrow_copy(clean: Path, tmp_path: Path) -> tuple[Path, Path]:
    needs_module("datasets")
    dataset = tmp_path / "data" / "ds"
    shutil.copytree(clean, dataset)
    return dataset, dataset / "arrow/data-00000-of-00001.arrow"


def rewrite_arrow(path: Path, change, compression: str | None = None) -> None:
    """The data file rewritten as an IPC stream of `change(table)`, its batches compressed if asked."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    table = change(ipc.open_stream(pa.py_buffer(path.read_bytes())).read_all())  # not mapped: rewritten below
    with ipc.new_stream(str(path), table.schema, options=ipc.IpcWriteOptions(compression=compression)) as out:
        out.write_table(table)


def _extra_column(size: int):
    """An extra column of `size` zero bytes (np.zeros: untouched pages, read as the zero page)."""
    import numpy as np
    import pyarrow as pa

    def change(table):
        per_row = size // len(table)
        values = pa.array(np.zeros(per_row * len(table), dtype=np.uint8))
        return table.append_column("extra", pa.FixedSizeListArray.from_arrays(values, per_row))

    return change


def test_arrow_a_compressed_column_is_refused_before_it_is_inflated(clean, tmp_path, results):
    """a 1.1 MB Arrow file with an extra zstd column of 4 GiB was inflated by load_from_disk (here 2 GiB)."""
    dataset, data = arrow_copy(clean, tmp_path)
    rewrite_arrow(data, _extra_column(2 * 2**30), compression="zstd")
    assert data.stat().st_size < 2**24
    rewrite_manifest(dataset, "arrow")
    for args in (run_args(dataset.parent, "arrow", "native", results), ["verify", "--data-dir", dataset.parent]):
        r, peak = run_with_peak_memory(*args)
        assert peak < 2**30, f"peak RSS {peak / 2**20:,.0f} MiB: the column was inflated"
        assert "a schema of features:" in r.err + r.out and "Traceback" not in r.err + r.out, (r.out, r.err)


@pytest.mark.parametrize(
    ("change", "compression", "fragment"),
    [
        (lambda table: table, "zstd", "a compressed record batch"),
        (lambda table: table.set_column(1, "label", table["label"].cast("float64")), None, "a schema of"),  # N7
        (lambda table: table.slice(0, N - 1), None, "rows in its data files"),
    ],
    ids=["compressed", "changed-schema", "rows-missing"],
)
def test_arrow_a_data_file_other_than_the_writers_is_refused_in_one_line(
    clean, tmp_path, results, cli, change, compression, fragment
):
    dataset, data = arrow_copy(clean, tmp_path)
    rewrite_arrow(data, change, compression)
    rewrite_manifest(dataset, "arrow")
    for loader in ("native", "dataloader"):
        assert_one_line_error(cli(*run_args(dataset.parent, "arrow", loader, results)), fragment)


def tfrecord_copy(clean: Path, tmp_path: Path) -> Path:
    needs_module("tfrecord")
    dataset = tmp_path / "data" / "ds"
    shutil.copytree(clean, dataset)
    return dataset


def rewrite_tfrecord(dataset: Path, edit, crc: bool = True) -> None:
    """Shard 0 rebuilt from its Examples passed through `edit(i, example_bytes) -> bytes`, framed with
    lengths, CRCs (`crc`: correct ones) and both indexes to match: only the Examples are hostile."""
    import crc32c

    def masked_crc(data: bytes) -> bytes:  # TFRecord's, as its format documents it
        crc = crc32c.crc32c(data)
        return ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF).to_bytes(4, "little")

    folder = dataset / "tfrecord"
    index = np.load(folder / "index.npy")
    data = (folder / "shard-000000.tfrecord").read_bytes()
    out, rows = bytearray(), []
    for i, (_, offset, size) in enumerate(index.tolist()):
        example = edit(i, data[offset + 12 : offset + size - 4])
        head = len(example).to_bytes(8, "little")
        tail = masked_crc(example) if crc else bytes(4)
        rows.append((0, len(out), 16 + len(example)))
        out += head + masked_crc(head) + example + tail
    (folder / "shard-000000.tfrecord").write_bytes(bytes(out))
    (folder / "shard-000000.index").write_text("".join(f"{o} {s}\n" for _, o, s in rows))
    np.save(folder / "index.npy", np.array(rows, dtype=np.int64))
    rewrite_manifest(dataset, "tfrecord")


def _example(change):
    def edit(i: int, example: bytes) -> bytes:
        if i != 7:
            return example
        from tfrecord import example_pb2

        parsed = example_pb2.Example()
        parsed.ParseFromString(example)
        change(parsed.features.feature)
        return parsed.SerializeToString()

    return edit


TFRECORD_LOADERS = ["native", "dataloader", pytest.param("nodes", marks=NEEDS_TORCHDATA)]


@pytest.mark.parametrize("loader", TFRECORD_LOADERS)
@pytest.mark.parametrize(
    ("edit", "fragment", "native_fragment"),
    [
        (lambda i, e: e if i != 7 else bytes(len(e)), "not a tf.train.Example", "DecodeError"),  # N7: garbage
        (
            _example(lambda f: (f["label"].ClearField("int64_list"), f["label"].float_list.value.append(2.5))),
            None,
            "tfrecord's own pipeline failed",
        ),  # N7: a float label was a TypeError traceback
        (
            _example(
                lambda f: (
                    f["index"].ClearField("bytes_list"),
                    f["index"].bytes_list.value.append((10**9).to_bytes(8, "little")),
                )
            ),
            None,
            "is not one of the 200 samples",
        ),  # N14: an index of 10^9 entered the shuffle score
        (
            _example(lambda f: (f["label"].ClearField("int64_list"), f["label"].int64_list.value.append(-3))),
            None,
            "is not a class of the dataset",
        ),  # N14: a negative label
    ],
    ids=["garbage", "float-label", "huge-index", "negative-label"],
)
def test_tfrecord_a_hostile_record_is_one_line(clean, tmp_path, results, cli, loader, edit, fragment, native_fragment):
    dataset = tfrecord_copy(clean, tmp_path)
    rewrite_tfrecord(dataset, edit)
    r = cli(*run_args(dataset.parent, "tfrecord", loader, results))
    if loader != "native" and fragment is None:  # iobench's loaders take labels and indices from labels.npy
        assert r.code == 0, r.err
        return
    assert r.code == 1 and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, r.err
    assert (native_fragment if loader == "native" else fragment) in r.err, r.err


def test_tfrecord_a_record_whose_crc_does_not_match_is_refused_by_iobenchs_readers(clean, tmp_path, results, cli):
    """a flipped payload byte was delivered (rc 0). The tfrecord package does not check CRCs (TensorFlow
    does): `verify` and iobench's own loaders do; its own pipeline delivers what the package reads."""
    dataset = tfrecord_copy(clean, tmp_path)
    rewrite_tfrecord(dataset, lambda i, e: e, crc=False)
    r = cli(*run_args(dataset.parent, "tfrecord", "dataloader", results))
    assert r.code == 1 and "CRC does not match" in r.err and "Traceback" not in r.err, r.err
    r = cli("verify", "--data-dir", dataset.parent, "-q")
    assert r.code == 1 and "CRC does not match" in r.out


def litdata_copy(clean: Path, tmp_path: Path) -> Path:
    needs_module("litdata")
    dataset = tmp_path / "data" / "ds"
    shutil.copytree(clean, dataset)
    return dataset


def _chunk_edit(change):
    def edit(dataset: Path) -> None:
        path = dataset / "litdata/chunk-0-0.bin"
        data = bytearray(path.read_bytes())
        change(data)
        path.write_bytes(bytes(data))

    return edit


def _float_size(dataset: Path) -> None:
    edit_json(dataset / "litdata/index.json", lambda index: index["chunks"][0].update(chunk_size=200.5))


@pytest.mark.parametrize("loader", ["native", "dataloader"])
@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (_float_size, "are not whole numbers"),  # N7: TypeError
        (_chunk_edit(lambda d: d.__setitem__(slice(8, 12), (10**6).to_bytes(4, "little"))), "follow each other"),
        (_chunk_edit(lambda d: d.__setitem__(slice(808, 812), (5000).to_bytes(4, "little"))), "sample 0"),
    ],
    ids=["float-size", "offset-beyond", "item-size"],
)
def test_litdata_a_hostile_chunk_is_one_line(clean, tmp_path, results, cli, loader, edit, fragment):
    """offsets beyond or before the chunk and wrong item sizes gave struct.error, a float size TypeError."""
    dataset = litdata_copy(clean, tmp_path)
    edit(dataset)
    rewrite_manifest(dataset, "litdata")
    r = cli(*run_args(dataset.parent, "litdata", loader, results))
    assert r.code in (1, 2) and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, r.err
    assert fragment in r.err or loader == "native", r.err  # LitData's own verdict, in one line


DEEP = "[" * 200_000 + "]" * 200_000  # 200,000 levels: RecursionError in Python's json


@pytest.mark.parametrize(
    ("name", "metadata"),
    [
        format_param("zarr", "zarr/features/zarr.json"),
        format_param("zarr", "zarr/zarr.json"),
        format_param("litdata", "litdata/index.json"),
        format_param("arrow", "arrow/state.json"),
    ],
)
def test_a_library_metadata_file_nested_too_deep_is_one_line(clean, tmp_path, results, cli, name, metadata):
    """zarr.json, LitData's index.json and Arrow's state.json 200,000 levels deep were RecursionErrors."""
    dataset = tmp_path / "data" / "ds"
    shutil.copytree(clean, dataset)
    (dataset / metadata).write_text(DEEP)
    rewrite_manifest(dataset, name)
    for loader in ("native", "dataloader"):
        assert_one_line_error(cli(*run_args(dataset.parent, name, loader, results)), "nested too deeply")


@pytest.mark.parametrize(("value", "shards"), [("1", N), ("4KB", None), ("0", 0), ("5.5MB", 0), ("1e9", 0)])
def test_arrow_max_shard_size_is_read_as_datasets_reads_it(tmp_path, cli, value, shards):
    """`--format-option arrow.max_shard_size=1` passed iobench's check and was a traceback in datasets."""
    needs_module("datasets")
    r = cli(
        "prepare",
        "--size",
        N,
        "--shape",
        "16",
        "--formats",
        "arrow",
        "--format-option",
        f"arrow.max_shard_size={value}",
        "--data-dir",
        tmp_path,
        "-q",
    )
    if shards == 0:
        assert_one_line_error(r, "max_shard_size is a size as datasets reads one")
        return
    assert r.code == 0, r.err
    files = list(tmp_path.glob("*/arrow/*.arrow"))
    assert len(files) == shards if shards else len(files) > 1


def test_tfrecords_pipeline_with_workers_prints_no_warning(clean, tmp_path, results):
    """Decoded images are read-only arrays: each worker printed torch's "not writable" warning every run."""
    dataset = tfrecord_copy(clean, tmp_path)
    r = run_subprocess(*run_args(dataset.parent, "tfrecord", "native", results, "--num-workers", "2"))
    assert r.returncode == 0 and "not writable" not in r.stderr, r.stderr


@pytest.mark.parametrize("name", [format_param(n) for n in NEW])
def test_every_pipeline_delivers_the_datasets_own_dtype(clean, name):
    """`native_loader(..., "arrow")` delivered int64 batches of a uint8 dataset (8x the bytes to the
    device) while the other formats delivered uint8 (datasets' torch format turns integers into int64)."""
    from iobench.api import native_loader

    features, labels = next(iter(native_loader(clean, name, batch_size=50)))
    assert features.dtype == torch.uint8 and tuple(features.shape[1:]) == (8, 8, 3), (features.dtype, features.shape)
    assert labels.dtype == torch.int64


def test_a_shard_cut_short_at_a_member_boundary_is_a_failed_run_not_a_partial_record(tmp_path, results, cli):
    """The fourth probe: a corrupted shard in the store gave exit 0 and a record of 1,500 of 2,000 samples,
    labelled partial as if --max-batches had been given. An epoch not cut short by the user delivers them all."""
    needs_module("webdataset")
    data = tmp_path / "data"
    invoke(
        "prepare",
        "--size",
        N,
        "--shape",
        "8,8,3",
        "--dtype",
        "uint8",
        "--formats",
        "webdataset",
        "--format-option",
        "webdataset.shard_samples=50",
        "--data-dir",
        data,
        "--dataset",
        "ds",
        "-q",
    )
    shard = data / "ds" / "webdataset" / "shard-000003.tar"
    with open(shard, "rb") as f:  # the first 25 of its 50 samples kept: a cut at a member boundary, no end block
        import tarfile

        members = list(tarfile.open(fileobj=f))
    cut = members[50].offset  # 2 members a sample (.png and .cls)
    shard.write_bytes(shard.read_bytes()[:cut])
    rewrite_manifest(data / "ds", "webdataset")
    r = cli(*run_args(data, "webdataset", "native", results))
    assert r.code == 1 and "Traceback" not in r.err, r.err
    assert f"delivered 175 of the {N} samples of an epoch" in r.err, r.err
    assert not results.exists()


@pytest.mark.parametrize("name", ["a b", "x#y", "q?z", "p%20q", "n" * 300, "-lead"])
def test_a_dataset_name_that_cannot_travel_to_object_storage_is_refused_at_prepare(tmp_path, cli, name):
    """'a b' panicked obstore (InvalidUri), `x#y`, `q?z` and `p%20q` asked for other objects, 300 characters were a
    file name too long: refused before anything is written."""
    r = cli(
        "prepare",
        "--size",
        10,
        "--shape",
        4,
        "--formats",
        "npy",
        "--data-dir",
        tmp_path / "data",
        "--dataset",
        name,
        "-q",
    )
    assert_one_line_error(r, "a dataset's name travels to object storage as it is")
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
