"""The runner alone, driven by a fake loader: how many loaders it builds, which epochs it times, what the
record says, for warm and cold runs (no dataset is read; cold eviction is recorded, not performed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from iobench.events import Events
from iobench.loaders.base import Loader
from iobench.run import format_epochs, runner
from tests.conftest import ScriptedStorage, invoke, resolved_run

N, BATCH = 64, 16


class FakeLoader(Loader):
    """Batches of zeros in the epoch order; counts what the runner asks of it."""

    built = 0
    closed = 0

    def __init__(self, resolved) -> None:
        super().__init__(resolved.epoch_order(), resolved.config.settings, torch.device("cpu"))
        FakeLoader.built += 1

    def _batches(self, epoch):
        for indices in self.order.batches(epoch):
            n = len(np.atleast_1d(indices)) if not isinstance(indices, range | slice) else BATCH
            yield torch.zeros(n, 3, 4), torch.zeros(n, dtype=torch.int64)

    def _release(self) -> None:
        FakeLoader.closed += 1


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("runner")
    invoke("prepare", "--size", N, "--shape", "3,4", "--formats", "npy", "--data-dir", root, "-q")
    (d,) = root.iterdir()
    return d


@pytest.fixture
def fake(monkeypatch):
    FakeLoader.built = FakeLoader.closed = 0
    monkeypatch.setattr(format_epochs, "build_loader", FakeLoader)


@pytest.mark.long
@pytest.mark.parametrize("cache", ["warm", "cold"])
def test_the_runner_times_the_epochs_it_should_and_records_them(dataset_dir, fake, cache):
    resolved = resolved_run(dataset_dir, "npy", "dataloader", batch_size=BATCH, runs=2, warmup=1, epochs=3, cache=cache)
    storage = ScriptedStorage(resolved.storage)
    resolved = replace(resolved, storage=storage)
    seen = []

    class Seen(Events):
        def epoch_done(self, run: int, epoch: int, warmup: bool, seconds: float) -> None:
            seen.append((run, epoch, warmup, seconds >= 0))

    record = runner.run(resolved, events=Seen())
    assert seen == [(r, e, e == 0, True) for r in range(2) for e in range(4)]  # warm-up epochs reported too
    e = record.epochs
    assert len(e.epoch_seconds) == 6 and e.samples_per_epoch == N and e.batches_per_epoch == N // BATCH
    assert len(record.system.residency_before) == 6 == len(record.system.residency_after)
    # a loader per run, plus a fresh one per cold timed epoch; every one of them closed
    assert FakeLoader.built == (2 + 6 if cache == "cold" else 2) == FakeLoader.closed
    assert storage.made_cold == (6 if cache == "cold" else 0)
    assert record.system.eviction_method == ("scripted" if cache == "cold" else None)
    assert record.config.cache == cache and record.config.runs == 2


def test_every_setting_of_a_run_is_recorded_and_nothing_else():
    """RecordedConfig was written out by hand from RunConfig and had dropped `eviction`: two runs that
    differed only in it shared an identity. It is filled by name now; a field added to one side only
    (or renamed on one side) fails here."""
    from dataclasses import fields

    from iobench.plan.config import RunConfig
    from iobench.results.record import RecordedConfig
    from iobench.settings import LoaderSettings

    recorded = {f.name for f in fields(RecordedConfig) if f.name != "settings"}
    recorded |= {f.name for f in fields(LoaderSettings)}
    renamed = {"torch_threads": "torch_threads_asked"}  # the environment's torch_threads is what the run had
    asked = {renamed.get(f.name, f.name) for f in fields(RunConfig) if f.name != "settings"}
    asked |= {f.name for f in fields(LoaderSettings)}
    where = {"dataset", "world_size", "backend", "device", "shuffle"}  # where it ran, and the order spelled out
    where |= {"format_written"}  # how the dataset read was written (its manifest's options, not the run's)
    where |= {
        "storage",
        "remote_profile",
        "remote_latency_ms",
        "remote_connection_mb_per_s",
        "remote_fuse_chunk",
        "remote_fuse_read_ahead",
        "remote_timeout_s",
        "remote_server",
    }  # the run's target
    assert asked - recorded == set(), "settings a record would not keep"
    assert recorded - asked - where == set(), "recorded fields no setting fills"


def test_the_recorded_config_carries_every_value_given(dataset_dir):
    resolved = resolved_run(
        dataset_dir,
        "npy",
        "dataloader",
        batch_size=8,
        eviction="fadvise",
        torch_threads=1,
        cpu_contention=2,
        cache="cold",
        runs=1,
    )
    c = resolved.recorded()
    assert (c.eviction, c.torch_threads_asked, c.cpu_contention, c.settings.batch_size) == ("fadvise", 1, 2, 8)


FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.mark.parametrize("name", ["records-schema1.jsonl", "records-schema2.jsonl"])
def test_stored_records_of_every_schema_are_read_and_written_back_whole(name):
    """Records written by earlier versions (kept as they were written) read through the typed reader,
    and every stored field, known or not, is written back with its value."""
    import json

    from iobench.results.record import RunRecord

    for line in (FIXTURES / name).read_text().splitlines():
        stored = json.loads(line)
        record = RunRecord.from_json(stored)
        assert record.schema_version == stored.get("schema_version", 1)
        assert (record.config.format, record.config.loader) == (stored["format"], stored["loader"])
        assert record.epochs.mb_per_s == stored["mb_per_s"]
        written = record.to_json()
        assert {k: written[k] for k in stored} == stored


def test_a_newer_schema_is_refused_and_unknown_fields_are_kept():
    import json

    from iobench.results.checked import RecordError
    from iobench.results.record import SCHEMA_VERSION, RunRecord

    stored = json.loads((FIXTURES / "records-schema2.jsonl").read_text().splitlines()[0])
    with pytest.raises(RecordError, match="newer than this iobench reads"):
        RunRecord.from_json({**stored, "schema_version": SCHEMA_VERSION + 1})
    record = RunRecord.from_json({**stored, "measured_by_a_later_version": [1, 2]})
    assert record.to_json()["measured_by_a_later_version"] == [1, 2]


def test_no_in_order_needs_workers():
    from iobench.errors import IobenchError
    from tests.conftest import run_config

    with pytest.raises(IobenchError, match="--no-in-order"):
        run_config("npy", "dataloader", in_order=False, num_workers=0)
    assert run_config("npy", "dataloader", in_order=False, num_workers=1).settings.in_order is False


@pytest.mark.parametrize("loader", ["dataloader", "tensorclass", "direct"])
def test_a_storage_drives_a_run_end_to_end(tmp_path, loader):
    """Everything about where the bytes live goes through the run's Storage: a scripted one (files read from a
    real folder) decides how cold was made, how cold it was, what moved and which controls held, and the
    record says exactly that."""
    invoke("prepare", "--size", N, "--shape", "3,4", "--formats", "memmap", "--data-dir", tmp_path, "-q")
    (dataset,) = tmp_path.iterdir()
    resolved = resolved_run(dataset, "memmap", loader, batch_size=BATCH, runs=1, warmup=0, epochs=2, cache="cold")
    storage = ScriptedStorage(resolved.storage)
    record = runner.run(replace(resolved, storage=storage))
    assert storage.made_cold == 2 and storage.controlled == 1
    assert record.epochs.samples_per_epoch == N
    s = record.system
    assert s.eviction_method == "scripted" and s.residency_before == [0.25, 0.25] == s.residency_after
    assert s.cold_not_cold, "0.25 cached at the start of a cold epoch is not cold"
    assert s.device_read_bytes == [1000, 1000] and s.process_read_bytes == [7, 7]
    assert s.data_block_device == "scripted0"


def test_a_transform_cost_the_timed_epochs_rule_out_is_not_recorded():
    """34,360 µs a sample was recorded where 2 workers delivered 337 samples/s: they cannot have spent more than
    2 x 1 s / 337 = 5,935 µs on each."""
    from iobench.measuring.clocks import EpochTiming
    from iobench.run.device_work import possible_cost
    from iobench.run.epoch_log import EpochLog
    from tests.conftest import run_config

    log = EpochLog(None, None)  # type: ignore[arg-type]
    log.timings = [EpochTiming(1.0, 0.1, 6, 337, 0.9, 0.0, 0.0, False)]
    config = replace(run_config("npy", "dataloader", num_workers=2), transform="augment")
    assert possible_cost(34_360.0, log, config) is None
    assert possible_cost(5_000.0, log, config) == 5_000.0
    assert possible_cost(None, log, config) is None
