"""`--loader device-read`: the features file read by cuFile straight into device memory. Without CUDA it is refused
in one line (named or built directly) and `--loader all` leaves it out saying why; the mode kvikio read in is named
from either of its settings APIs. Its reads on a GPU are measured by scripts/gpu_smoke.sh."""

from __future__ import annotations

import types

import pytest
import torch

from iobench.errors import IobenchError
from iobench.loaders import LOADERS, LoaderName
from iobench.loaders.base import LoaderContext, ReadMethod
from iobench.loaders.device_read import DeviceReadLoader, kvikio_mode
from iobench.loaders.order import EpochOrder
from iobench.run.building import open_reader
from iobench.settings import LoaderSettings
from tests.conftest import assert_one_line_error, invoke, resolved_run


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("device_read")
    invoke("prepare", "--size", 500, "--shape", "3,4", "--formats", "npy,memmap,lmdb", "--data-dir", root, "-q")
    (d,) = root.iterdir()
    return d


def test_named_on_the_cpu_it_is_one_line(dataset_dir, cli, tmp_path):
    r = cli(
        "run",
        "--data-dir",
        dataset_dir.parent,
        "--format",
        "npy",
        "--loader",
        "device-read",
        "--device",
        "cpu",
        "--results",
        tmp_path / "r.jsonl",
    )
    assert_one_line_error(r, "reads into device memory: needs CUDA")
    assert not (tmp_path / "r.jsonl").exists()


def test_all_on_the_cpu_leaves_it_out_and_says_why(dataset_dir, cli, tmp_path):
    r = cli(
        "run",
        "--data-dir",
        dataset_dir.parent,
        "--format",
        "npy",
        "--loader",
        "all",
        "--device",
        "cpu",
        "--max-batches",
        "1",
        "--runs",
        "1",
        "--epochs",
        "1",
        "--results",
        tmp_path / "r.jsonl",
    )
    assert r.code == 0, r.err
    assert "skipped device-read: it reads into device memory, which needs CUDA" in r.err + r.out


def test_it_reads_fixed_layouts_only(dataset_dir):
    assert set(LOADERS[LoaderName.DEVICE_READ].reads) >= {"npy", "memmap"}
    assert "lmdb" not in LOADERS[LoaderName.DEVICE_READ].reads


def test_built_without_cuda_it_refuses_and_closes_its_reader(dataset_dir):
    resolved = resolved_run(dataset_dir, "npy", "dataloader")
    reader = open_reader(resolved)
    assert reader.handle is not None  # opened, as a loader's reader is
    ctx = LoaderContext(reader, EpochOrder(500, 64, True, 0), LoaderSettings(batch_size=64), torch.device("cpu"))
    with pytest.raises(IobenchError, match="needs CUDA"):
        DeviceReadLoader(ctx)
    assert reader._handle is None, "the refusal closed the reader it was given"


@pytest.mark.parametrize(
    ("defaults", "mode"),
    [
        (
            types.SimpleNamespace(get=lambda name: {"compat_mode": types.SimpleNamespace(name="ON")}[name]),
            ReadMethod.DEVICE_KVIKIO_COMPAT,
        ),
        (types.SimpleNamespace(get=lambda name: types.SimpleNamespace(name="OFF")), ReadMethod.DEVICE_KVIKIO_GDS),
        (types.SimpleNamespace(compat_mode=lambda: True), ReadMethod.DEVICE_KVIKIO_COMPAT),
        (types.SimpleNamespace(compat_mode=lambda: False), ReadMethod.DEVICE_KVIKIO_GDS),
        (types.SimpleNamespace(), ReadMethod.DEVICE_KVIKIO),
        # AUTO (kvikio 26.10's default): what kvikio found, GDS or not
        (
            types.SimpleNamespace(
                get=lambda name: types.SimpleNamespace(name="AUTO"), is_compat_mode_preferred=lambda: True
            ),
            ReadMethod.DEVICE_KVIKIO_COMPAT,
        ),
        (
            types.SimpleNamespace(
                get=lambda name: types.SimpleNamespace(name="AUTO"), is_compat_mode_preferred=lambda: False
            ),
            ReadMethod.DEVICE_KVIKIO_GDS,
        ),
    ],
)
def test_the_record_names_the_mode_kvikio_read_in(defaults, mode):
    assert kvikio_mode(types.SimpleNamespace(defaults=defaults)) is mode
