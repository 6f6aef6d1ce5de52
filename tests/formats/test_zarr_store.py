"""zarr over object storage opens the metadata iobench checked, never a second fetch of it: a server may answer
the second request differently (a shape, a codec) from the first."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import invoke, needs_module

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

needs_module("zarr")
needs_module("obstore")


@pytest.mark.parametrize("zarr_store", ["ObjectStore", "MemoryStore"])
def test_zarr_reads_the_checked_metadata_not_what_the_store_says_later(tmp_path, zarr_store):
    """Through obstore's store, and through any other zarr store (FsspecStore is one more of them)."""
    import zarr.storage
    from obstore.store import MemoryStore

    from iobench.formats.zarr_store import checked_remote_arrays

    invoke("prepare", "--size", 64, "--shape", "3,4", "--formats", "zarr", "--data-dir", tmp_path, "-q")
    (dataset,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    store = MemoryStore()
    for path in (dataset / "zarr").rglob("*"):
        if path.is_file():
            store.put(f"zarr/{path.relative_to(dataset / 'zarr').as_posix()}", path.read_bytes())
    honest = (dataset / "zarr/features/zarr.json").read_bytes()
    changed = json.loads(honest)
    changed["shape"] = [10**9, 3, 4]  # what a second answer could say
    store.put("zarr/features/zarr.json", json.dumps(changed).encode())
    if zarr_store == "ObjectStore":
        store = zarr.storage.ObjectStore(store, read_only=True)
    else:
        objects = {p["path"]: bytes(store.get(p["path"]).bytes()) for page in store.list() for p in page}
        store = zarr.storage.MemoryStore(
            {k: zarr.core.buffer.cpu.Buffer.from_bytes(v) for k, v in objects.items()}, read_only=True
        )
    features, labels = checked_remote_arrays(store, "zarr", {"zarr/features/zarr.json": honest})
    assert features.shape == (64, 3, 4) and labels.shape == (64,)
    assert np.isfinite(features[:8]).all()
    unchecked, _ = checked_remote_arrays(store, "zarr", {})
    assert unchecked.shape == (10**9, 3, 4), "the store's own answer, where nothing was checked"
