"""WebDataset, Hugging Face Arrow, Zarr v3, TFRecord and LitData: read back by their own libraries with no iobench code,
their own pipelines (`--loader native`) deliver every sample once per epoch, and what a crafted dataset
could make their libraries do (unpickle, read outside the folder) is refused first."""

from __future__ import annotations

import io
import json
import os
import tarfile

import numpy as np
import pytest
from PIL import Image

from iobench.formats import FORMATS
from iobench.loaders import LoaderName
from iobench.plan.config import RunConfig
from iobench.plan.resolve import check_dataset, check_world
from iobench.run.runner import run
from iobench.settings import LoaderSettings
from iobench.system.world import World
from tests.conftest import assert_one_line_error, format_param, invoke, needs_module, resolved_run

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

NEW = ("webdataset", "arrow", "zarr", "tfrecord", "litdata")
N = 240


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """A small-image dataset (3x8x8 uint8, PNG in WebDataset) with npy beside it as the reference."""
    root = tmp_path_factory.mktemp("new")
    wanted = ",".join(["npy", *(n for n in NEW if FORMATS.installed(n))])
    invoke(
        "prepare",
        "--size",
        str(N),
        "--shape",
        "3,8,8",
        "--dtype",
        "uint8",
        "--data-dir",
        root,
        "-q",
        "--formats",
        wanted,
    )
    dataset = next(p for p in root.iterdir() if p.is_dir())
    return dataset, np.load(dataset / "npy/features.npy"), np.load(dataset / "npy/labels.npy")


@pytest.mark.parametrize("name", [format_param(n) for n in NEW])
def test_each_format_reads_back_with_its_own_library_alone(images, name):
    dataset, features, labels = images
    folder = dataset / name
    if name == "webdataset":
        import webdataset as wds

        urls = sorted(str(p) for p in folder.glob("*.tar"))
        got = {int(s["__key__"]): s for s in wds.WebDataset(urls, shardshuffle=False)}
        assert sorted(got) == list(range(N))
        for i in (0, 17, N - 1):
            pixels = np.moveaxis(np.asarray(Image.open(io.BytesIO(got[i]["png"]))), -1, 0)
            assert np.array_equal(pixels, features[i]) and int(got[i]["cls"]) == labels[i]
    elif name == "arrow":
        import datasets

        ds = datasets.load_from_disk(str(folder)).with_format("numpy")
        assert np.array_equal(ds["features"][:], features) and np.array_equal(ds["label"][:], labels)
    elif name == "tfrecord":
        from tfrecord.torch.dataset import MultiTFRecordDataset

        shards = sorted(p.stem.removeprefix("shard-") for p in folder.glob("*.tfrecord"))
        ds = MultiTFRecordDataset(
            str(folder / "shard-{}.tfrecord"),
            str(folder / "shard-{}.index"),
            dict.fromkeys(shards, 1.0),
            infinite=False,
        )
        got = {int.from_bytes(e["index"], "little"): e for e in ds}
        assert sorted(got) == list(range(N))
        for i in (0, 17, N - 1):
            pixels = np.moveaxis(np.asarray(Image.open(io.BytesIO(got[i]["image"]))), -1, 0)
            assert np.array_equal(pixels, features[i]) and int(got[i]["label"][0]) == labels[i]
    elif name == "litdata":
        import litdata

        ds = litdata.StreamingDataset(str(folder))
        got = [ds[i] for i in range(len(ds))]
        assert [g["index"] for g in got] == list(range(N)) and [g["label"] for g in got] == labels.tolist()
        assert np.array_equal(np.stack([g["features"] for g in got]), features)
    else:
        import zarr

        group = zarr.open_group(str(folder), mode="r")
        assert np.array_equal(group["features"][:], features) and np.array_equal(group["labels"][:], labels)


@pytest.mark.parametrize(
    ("name", "workers", "shuffle"), [format_param(n, w, s) for n in NEW for w in (0, 2) for s in (True, False)]
)
def test_the_native_pipeline_delivers_every_sample_once_and_is_scored(images, name, workers, shuffle):
    dataset, _, _ = images
    resolved = resolved_run(
        dataset, name, "native", batch_size=32, num_workers=workers, shuffle=shuffle, runs=1, epochs=2
    )
    from iobench.run.building import build_loader

    loader = build_loader(resolved)
    try:
        for epoch in (0, 1):
            labels = np.concatenate([b[1].numpy() for b in loader.epoch(epoch)])
            delivered = loader.delivered(epoch, len(labels))
            assert sorted(delivered.tolist()) == list(range(N)), "every sample exactly once"
            assert np.array_equal(labels, images[2][delivered]), "each label with its own sample"
    finally:
        loader.close()
    record = run(resolved)
    assert record.epochs.samples_per_epoch == N and record.epochs.shuffle_order is not None
    from importlib import metadata

    library = FORMATS._entries[name].needs  # each library on the path is named with its version (schema 3)
    assert record.environment.packages[library] == metadata.version(library) and record.schema_version == 3


def test_webdataset_shuffles_less_than_a_global_shuffle(tmp_path):
    needs_module("webdataset")
    invoke("prepare", "--size", "4000", "--shape", "16", "--data-dir", tmp_path, "-q", "--formats", "webdataset,npy")
    dataset = next(p for p in tmp_path.iterdir() if p.is_dir())
    # 4,000 samples in one 10,000-sample shard: only the 1,000-sample buffer mixes them
    native = run(resolved_run(dataset, "webdataset", "native", batch_size=64, runs=1))
    uniform = run(resolved_run(dataset, "npy", "dataloader", batch_size=64, runs=1))
    assert native.epochs.shuffle_spread < 0.7 * uniform.epochs.shuffle_spread, (native.epochs, uniform.epochs)


def test_a_missing_library_is_one_line_naming_the_extra_and_all_skips_it(tmp_path, cli, monkeypatch):
    monkeypatch.setattr(type(FORMATS), "installed", lambda self, name: name not in NEW)
    r = cli("prepare", "--size", "100", "--data-dir", tmp_path, "-q", "--formats", "zarr")
    assert_one_line_error(r, "pip install 'iobench[zarr]'")
    r = cli("prepare", "--size", "100", "--data-dir", tmp_path, "-q", "--formats", "all")
    assert r.code == 0 and "skipped webdataset, arrow, zarr, tfrecord, litdata: not installed" in r.err


def test_arrow_refuses_a_state_naming_a_file_outside_the_folder(images, tmp_path):
    needs_module("datasets")
    from iobench.formats.arrow import check_state

    dataset, _, _ = images
    state = json.loads((dataset / "arrow/state.json").read_text())
    for name in ("../../npy/features.npy", "/etc/hostname"):
        copy = tmp_path / name.replace("/", "_")
        copy.mkdir()
        bad = dict(state, _data_files=[{"filename": name}])
        (copy / "state.json").write_text(json.dumps(bad))
        with pytest.raises(ValueError, match="not a plain .arrow file"):
            check_state(copy)


def test_zarr_refuses_a_pickle_codec_and_links(images, tmp_path):
    needs_module("zarr")
    import shutil

    from iobench.data.manifest import Manifest
    from iobench.formats.zarr import check_store

    dataset, _, _ = images
    manifest = Manifest.load(dataset)
    copy = tmp_path / "z"
    shutil.copytree(dataset / "zarr", copy)
    meta_path = copy / "features" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["codecs"][0]["configuration"]["codecs"] = [{"name": "bytes"}, {"name": "numcodecs.pickle"}]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="numcodecs.pickle"):
        check_store(copy, manifest.spec)
    meta["codecs"] = [{"name": "bytes"}, {"name": "numcodecs.pickle"}]  # in place of the writer's sharding
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="not one sharding codec"):
        check_store(copy, manifest.spec)
    shutil.rmtree(copy)
    shutil.copytree(dataset / "zarr", copy)
    (copy / "labels" / "zarr.json").unlink()
    os.symlink(dataset / "zarr" / "labels" / "zarr.json", copy / "labels" / "zarr.json")
    with pytest.raises(ValueError, match="a link"):
        check_store(copy, manifest.spec)


def test_webdataset_never_unpickles_a_member_and_refuses_an_index_outside_its_shard(images, tmp_path):
    needs_module("webdataset")
    import pickle
    import shutil

    from iobench.data.manifest import Manifest
    from iobench.formats.webdataset import INDEX, _OpenShards, pipeline

    dataset, _, _ = images
    spec = Manifest.load(dataset).spec
    fmt = FORMATS["webdataset"]
    options = fmt.options_from_json(Manifest.load(dataset).formats["webdataset"].options)
    copy = tmp_path / "w"
    shutil.copytree(dataset / "webdataset", copy)
    shard = copy / "shard-000000.tar"
    marker = tmp_path / "unpickled"

    class Boom:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    with tarfile.open(shard, "a") as tar:  # a crafted member beside a sample's
        data = pickle.dumps(Boom())
        info = tarfile.TarInfo(f"{0:03d}.pyd")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ValueError, match="didn't find"):  # a sample of a .pyd alone: no features in it
        for _ in pipeline(_OpenShards(copy, spec), spec, options, 16, shuffle=False, seed=0):
            pass
    assert not marker.exists(), "a .pyd member was unpickled"
    index = np.load(copy / INDEX)
    index[5, 1] = 10**12
    with open(copy / INDEX, "wb") as f:
        np.save(f, index)
    reader = fmt.reader(copy, spec, options)
    with pytest.raises(ValueError, match="outside its shard"):
        reader.sample(0)


def test_a_library_failing_midway_never_leaves_half_a_dataset(tmp_path, cli, monkeypatch):
    """A writer that fails midway (here: the library raises) leaves no format folder behind."""
    needs_module("zarr")
    import zarr

    def broken(*args, **kwargs):
        raise OSError("disk on fire")

    monkeypatch.setattr(zarr, "open_group", broken)
    r = cli("prepare", "--size", "100", "--data-dir", tmp_path, "-q", "--formats", "zarr")
    assert r.code != 0
    leftovers = [p for p in tmp_path.rglob("*") if "zarr" in p.name]
    assert not leftovers, leftovers


def test_tfrecord_refuses_a_record_whose_length_field_lies_before_the_library_reads_it(images, tmp_path):
    """The tfrecord package grows its buffer to 1.5x a record's declared length and seeks by the text
    index: a crafted length (2^60) or index must be refused before the library sees either."""
    needs_module("tfrecord")
    import shutil
    import struct

    from iobench.data.manifest import Manifest
    from iobench.formats.tfrecord import SHARD, SHARD_INDEX, check_shards

    dataset, _, _ = images
    fmt = FORMATS["tfrecord"]
    manifest = Manifest.load(dataset)
    options = fmt.options_from_json(manifest.formats["tfrecord"].options)
    copy = tmp_path / "tfrecord"
    shutil.copytree(dataset / "tfrecord", copy)
    check_shards(copy, manifest.spec, options)  # the copy as written passes
    index_text = (copy / (SHARD_INDEX % 0)).read_text()
    (copy / (SHARD_INDEX % 0)).write_text(index_text.replace("\n", "\n", 1).replace("0 ", "1 ", 1))
    with pytest.raises(ValueError, match="does not match"):
        check_shards(copy, manifest.spec, options)
    (copy / (SHARD_INDEX % 0)).write_text(index_text)
    with open(copy / (SHARD % 0), "r+b") as f:
        f.write(struct.pack("<Q", 2**60))
    with pytest.raises(ValueError, match="declares another length"):
        check_shards(copy, manifest.spec, options)


def test_tfrecord_written_with_an_int_index_is_still_read_and_a_bad_index_refused(tmp_path, monkeypatch):
    """Datasets prepared before the index became 8 bytes (the manifest has no index_bytes) still run."""
    needs_module("tfrecord")
    from iobench.formats import tfrecord

    def put_int(self, index, payload, label):
        if self.sink is None or index == self.bounds[self.shard + 1]:
            self._roll()
        offset = self.sink.file.tell()
        self.sink.write({"image": (payload, "byte"), "label": (label, "int"), "index": (index, "int")})
        self.index[index] = (self.shard, offset, self.sink.file.tell() - offset)

    monkeypatch.setattr(tfrecord.TFRecordWriter, "put", put_int)
    invoke(
        "prepare",
        "--size",
        "60",
        "--shape",
        "3,4,4",
        "--dtype",
        "uint8",
        "--data-dir",
        tmp_path,
        "-q",
        "--formats",
        "npy,tfrecord",
        "--format-option",
        "tfrecord.shard_samples=20",
    )
    dataset = next(p for p in tmp_path.iterdir() if p.is_dir())
    manifest_path = dataset / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["formats"]["tfrecord"]["options"]["index_bytes"]  # as an older iobench wrote it
    manifest_path.write_text(json.dumps(manifest))
    labels = np.load(dataset / "npy/labels.npy")
    for workers in (0, 2):
        resolved = resolved_run(dataset, "tfrecord", "native", batch_size=16, num_workers=workers, runs=1)
        from iobench.run.building import build_loader

        loader = build_loader(resolved)
        try:
            got = np.concatenate([b[1].numpy() for b in loader.epoch(0)])
            delivered = loader.delivered(0, len(got))
        finally:
            loader.close()
        assert sorted(delivered.tolist()) == list(range(60)) and np.array_equal(got, labels[delivered])
    assert tfrecord.record_index((5).to_bytes(8, "little")) == 5
    with pytest.raises(ValueError, match="holds 4 bytes"):
        tfrecord.record_index(b"\x00" * 4)


def test_litdata_written_by_several_processes_reads_back_in_order(tmp_path):
    """processes=3: this process and two others each write a contiguous share; LitData's merge joins the
    indexes in rank order, so its own library reads sample i as item i."""
    needs_module("litdata")
    import litdata

    from iobench.data.manifest import Manifest

    invoke(
        "prepare",
        "--size",
        "500",
        "--shape",
        "3,8,8",
        "--dtype",
        "uint8",
        "--data-dir",
        tmp_path,
        "-q",
        "--formats",
        "npy,litdata",
        "--format-option",
        "litdata.processes=3",
        "--format-option",
        "litdata.chunk_bytes=40kB",
    )
    dataset = next(p for p in tmp_path.iterdir() if p.is_dir())
    assert Manifest.load(dataset).formats["litdata"].options["processes"] == 3
    ranks = {int(p.name.split("-")[1]) for p in (dataset / "litdata").glob("chunk-*.bin")}
    assert ranks == {0, 1, 2}, "every process wrote chunks"
    assert not list((dataset / "litdata").glob("*.index.json")), "the per-rank indexes were merged"
    ds = litdata.StreamingDataset(str(dataset / "litdata"))
    got = [ds[i] for i in range(len(ds))]
    assert [g["index"] for g in got] == list(range(500))
    assert np.array_equal(np.stack([g["features"] for g in got]), np.load(dataset / "npy/features.npy"))
    invoke("verify", "--data-dir", tmp_path, "-q")


def test_zarr_reads_a_run_of_consecutive_samples_as_a_slice(images):
    """A sequential batch is one range read, any order of it; a scattered batch stays an orthogonal selection."""
    needs_module("zarr")
    from iobench.formats.zarr import open_arrays, sorted_read

    dataset, features, _ = images
    stored, _ = open_arrays(dataset / "zarr", resolved_run(dataset, "zarr", "native").manifest.spec)

    class SlicesOnly:
        oindex = property(lambda self: pytest.fail("an integer selection for consecutive samples"))

        def __getitem__(self, key):
            assert isinstance(key, slice), key
            return stored[key]

    run = np.array([19, 5, 12, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18])
    assert np.array_equal(sorted_read(SlicesOnly(), run), features[run])
    scattered = np.array([200, 3, 77, 4])
    assert np.array_equal(sorted_read(stored, scattered), features[scattered])


def test_litdata_under_torchrun_refuses_a_world_its_whole_batches_leave_empty(images, cli):
    """Refused by --nproc before torchrun starts (every rank would time empty epochs); 120 a batch is fine."""
    needs_module("litdata")
    dataset, _, _ = images
    common = [
        "--data-dir",
        dataset.parent,
        "--results",
        dataset.parent / "refused.jsonl",
        "-q",
        "--format",
        "litdata",
        "--loader",
        "native",
        "--nproc",
        "2",
    ]
    r = cli("run", *common, "--batch-size", "128")
    assert_one_line_error(r, "240 samples give none; use a smaller --batch-size")
    assert "launching" not in r.out + r.err
    config = RunConfig(format="litdata", loader=LoaderName.NATIVE, settings=LoaderSettings(batch_size=120))
    check_world(config, check_dataset(dataset, "litdata"), World(size=2, local_size=2))


def test_a_failing_litdata_writer_process_is_one_line_and_leaves_nothing(tmp_path, cli, monkeypatch):
    needs_module("litdata")
    import subprocess
    import sys

    from iobench.formats import litdata as module

    real = subprocess.Popen

    def failing(command, **kw):  # the other process dies as a broken one would, with its reason last
        return real([sys.executable, "-c", "import sys; sys.exit('no space left for the chunk')"], **kw)

    monkeypatch.setattr(module.subprocess, "Popen", failing)
    r = cli(
        "prepare",
        "--size",
        "300",
        "--shape",
        "3,8,8",
        "--dtype",
        "uint8",
        "--data-dir",
        tmp_path,
        "-q",
        "--formats",
        "litdata",
        "--format-option",
        "litdata.processes=2",
    )
    assert_one_line_error(r, "litdata writer process 1 failed: no space left for the chunk")
    assert not [p for p in tmp_path.rglob("*") if "litdata" in p.name], "no partial folder left"


def test_litdata_refuses_a_pickle_serializer_and_a_chunk_outside_the_folder(images, tmp_path):
    """LitData decodes each field with the serializer index.json names (it has a pickle one) and opens the
    chunk files it names: both are checked before the library reads the index."""
    needs_module("litdata")
    import shutil

    from iobench.data.manifest import Manifest
    from iobench.formats.litdata import INDEX, check_index

    dataset, _, _ = images
    spec = Manifest.load(dataset).spec
    copy = tmp_path / "litdata"
    shutil.copytree(dataset / "litdata", copy)
    check_index(copy, spec)  # the copy as written passes
    index = json.loads((copy / INDEX).read_text())
    for key, value, message in (
        ("data_format", ["pickle", "int", "int"], "fields"),
        ("compression", "zstd", "compression"),
    ):
        bad = json.loads(json.dumps(index))
        bad["config"][key] = value
        (copy / INDEX).write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=message):
            check_index(copy, spec)
    for name in ("../../npy/features.npy", "/etc/hostname", "chunk-0-9.bin"):
        bad = json.loads(json.dumps(index))
        bad["chunks"][0]["filename"] = name
        (copy / INDEX).write_text(json.dumps(bad))
        with pytest.raises(ValueError, match="not a plain chunk file"):
            check_index(copy, spec)
