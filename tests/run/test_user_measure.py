"""`iobench.measure`: a user's own Dataset and DataLoader timed with iobench's clocks."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import iobench
from iobench.errors import IobenchError


class Squares(Dataset):
    """A user's dataset: nothing of iobench in it."""

    def __len__(self) -> int:
        return 300

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.full((4, 8), float(i)), i % 10


class Slow(Squares):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.0005)
        return super().__getitem__(i)


def test_the_api_is_visible_and_import_stays_light():
    assert {"measure", "open_dataset"} <= set(dir(iobench))
    with pytest.raises(AttributeError):
        iobench.nothing_here  # noqa: B018


def test_measure_times_a_users_dataloader_every_sample_once_per_epoch():
    m = iobench.measure(DataLoader(Squares(), batch_size=64, shuffle=True), epochs=2, warmup=1)
    assert [t.samples for t in m.timings] == [300, 300] and [t.batches for t in m.timings] == [5, 5]
    assert m.sample_bytes == 4 * 8 * 4 and not m.stats.partial
    assert m.samples_per_s == pytest.approx(300 / m.stats.epoch_seconds_median)
    assert m.accelerator_utilisation is None and "samples/s" in m.summary()


def test_measure_splits_the_time_and_gives_au_against_the_step():
    """A loader that sleeps 0.5 ms a sample and a 20 ms step: the wait and the step are where the time went."""
    m = iobench.measure(Slow(), batch_size=100, step="sleep:20", epochs=2, warmup=0)
    s = m.stats
    assert s.wait_ms_per_batch > 100 * 0.5 * 0.9 and s.step_ms_per_batch == pytest.approx(20, rel=0.5)
    assert 0 < m.accelerator_utilisation < 0.5, "the step is about a quarter of each batch's time"
    assert m.to_json()["wait_ms_per_batch"] == s.wait_ms_per_batch


def test_measure_takes_plain_tensors_and_dicts_and_runs_the_mlp_step():
    tensors = [torch.rand(32, 16) for _ in range(4)]
    assert iobench.measure(tensors, epochs=1, warmup=0, step="mlp").timings[0].samples == 128
    dicts = [{"image": torch.rand(8, 3), "label": torch.arange(8)} for _ in range(3)]
    assert iobench.measure(dicts, epochs=1, warmup=0).timings[0].samples == 24


def test_measure_refuses_what_it_cannot_do_in_one_line(tmp_path):
    with pytest.raises(IobenchError, match="needs batches of tensors"):
        iobench.measure([["a", "b"]], epochs=1, warmup=0)
    with pytest.raises(IobenchError, match="needs files"):
        iobench.measure(Squares(), cache="cold")
    with pytest.raises(IobenchError, match="unknown step|step"):
        iobench.measure(Squares(), step="nap")


def test_measure_cold_evicts_the_files_it_is_given(tmp_path):
    import numpy as np

    path = tmp_path / "x.npy"
    np.save(path, np.arange(4096 * 64, dtype=np.float32).reshape(4096, 64))

    class FromFile(Dataset):
        def __len__(self) -> int:
            return 4096

        def __getitem__(self, i: int) -> torch.Tensor:
            with open(path, "rb") as f:  # opened per read: nothing stays mapped across an eviction
                f.seek(128 + i * 256)
                return torch.frombuffer(bytearray(f.read(256)), dtype=torch.float32)

    m = iobench.measure(FromFile(), batch_size=512, cache="cold", files=[path], epochs=1, warmup=0)
    assert m.cache == "cold" and m.timings[0].samples == 4096


@pytest.mark.long
def test_what_measure_returns_is_a_record_that_report_and_compare_read(tmp_path, cli):
    from iobench.results.store import append_record, load_records

    results = tmp_path / "mine.jsonl"
    for _ in range(2):
        append_record(results, iobench.measure(DataLoader(Squares(), batch_size=50, shuffle=True), epochs=3))
    (a, b) = load_records(results).records
    assert a.config.format == "user" and a.config.dataset == "Squares" and a.config.settings.batch_size == 50
    assert a.dataset.n_samples == 300 and a.config.shuffle and b.identity() == a.identity()
    r = cli("report", results, "--out", tmp_path / "report")
    assert r.code == 0 and "Squares" in (tmp_path / "report" / "report.md").read_text(), r.err
    r = cli("compare", results, results)
    assert r.code == 0 and "1 matching configuration(s) (1 no decidable difference)" in r.out, r.out


@pytest.mark.parametrize("empty", [[], iter(()), "dataset"])
def test_measure_of_nothing_is_one_line(empty):
    """`iobench.measure([])` ended in a bare StopIteration."""
    import iobench
    from iobench.errors import IobenchError

    if empty == "dataset":
        empty = torch.utils.data.TensorDataset(torch.zeros(0, 3))
    with pytest.raises(IobenchError, match="yielded no batch"):
        iobench.measure(empty, epochs=1)
