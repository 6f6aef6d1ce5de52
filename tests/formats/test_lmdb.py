"""LMDB reads ahead unless the page cache cannot hold its files: LMDB's advice against read-ahead is for random
reads of a database larger than RAM; a shuffled epoch of one that fits reads every page anyway (2.6-14x faster
cold with read-ahead here)."""

from __future__ import annotations

import numpy as np
import torch

from iobench.data.manifest import Manifest
from iobench.formats import FORMATS
from iobench.plan.resolve import ResolvedRun, RunTarget
from iobench.run import building
from iobench.run.building import open_reader
from iobench.storage import ReadHints
from iobench.storage.local import LocalStorage
from iobench.storage.local.confine import Confinement
from iobench.system.world import SINGLE
from tests.conftest import invoke, run_config


def test_lmdb_reads_ahead_unless_the_run_is_larger_than_memory(tmp_path, monkeypatch):
    invoke("prepare", "--size", "200", "--formats", "lmdb", "--data-dir", tmp_path, "-q")
    (dataset,) = tmp_path.iterdir()
    manifest = Manifest.load(dataset)
    fmt, entry = FORMATS["lmdb"], manifest.formats["lmdb"]
    for sequential, larger, expected in [(False, False, True), (False, True, False), (True, True, True)]:
        hints = ReadHints(sequential=sequential, larger_than_memory=larger)
        with fmt.reader(entry.folder(dataset), manifest.spec, fmt.options_from_json(entry.options), hints) as reader:
            reader.batch(np.arange(4))
            assert reader.handle.env.flags()["readahead"] is expected, (sequential, larger)

    def resolved(**kw) -> ResolvedRun:
        """As resolve() builds it, without its check that a budget this small holds a batch in flight."""
        config = run_config("lmdb", "dataloader", **kw)
        budget = config.cache_budget.of(entry.bytes) if config.cache_budget is not None else None
        storage = LocalStorage(
            entry.file_paths(dataset), entry.folder(dataset), dataset, confinement=Confinement(None, budget)
        )
        return ResolvedRun(config, RunTarget(dataset, torch.device("cpu")), SINGLE, manifest, storage)

    assert resolved(cache_budget="20%").storage.larger_than_memory  # a budget below the files' size
    assert not resolved(cache_budget="1G").storage.larger_than_memory
    assert not resolved().storage.larger_than_memory
    opened = []
    monkeypatch.setattr(building, "open_reader", lambda r: opened.append(open_reader(r)) or opened[-1])
    building.build_loader(resolved(cache_budget="20%")).close()
    assert [r.larger_than_memory for r in opened] == [True], "the runner tells the reader"
