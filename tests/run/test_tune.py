"""tune's search (`iobench.run.tune.tune`): candidates taken in turn each round, in a fresh order, and the search
settled by the rounds' pairs where a drift shared by every candidate of a round keeps their own intervals wide; beside
other programs the runner-up is credited with its wait for a CPU beyond the leader's, so a lead that contention made
does not settle the search. Candidates and records are planted: the figures are known."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from iobench.judge.search import STOP_APART
from iobench.plan.config import RunConfig
from iobench.run.tune import TuneResult, tune
from tests.conftest import record_of

SAMPLES = 1000


FORMATS = ("npy", "hdf5", "memmap", "lmdb")


def _configs(*speeds: float) -> tuple[list[RunConfig], dict[str, float]]:
    """Candidates and their samples/s on a steady machine."""
    configs = [RunConfig(format=f) for f in FORMATS[: len(speeds)]]
    return configs, {c.label: v for c, v in zip(configs, speeds, strict=True)}


@dataclass
class _Drifting:
    """Candidates' records, every candidate of a round slowed alike (the disk drifting 1 +- 30% between rounds, each
    round known by its epochs);
    `waits`: each candidate's (cpu s, wait s) a run. It keeps the order candidates were measured in."""

    speeds: dict[str, float]
    waits: dict[str, tuple[float, float]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def trial(self, config: RunConfig, epochs: int, max_seconds: float | None):
        label = config.label

        def measure():
            drift = 1 + 0.3 * math.sin(epochs * 1.7)
            self.calls.append(label)
            seconds = [SAMPLES / (self.speeds[label] * drift * (1 + 0.002 * k)) for k in range(epochs)]
            cpu, wait = self.waits.get(label, (1.0, 0.0))
            return record_of(
                format=config.format,
                epochs=epochs,
                runs=1,
                epoch_seconds=seconds,
                epoch_seconds_median=sorted(seconds)[len(seconds) // 2],
                samples_per_epoch=SAMPLES,
                unit_cpu_s=[cpu],
                unit_cpu_wait_s=[wait],
                unit_wall_s=[sum(seconds)],
            )

        return (label, epochs, max_seconds, len(self.calls)), measure


def _search(trials: _Drifting, folder: Path, configs: list[RunConfig]) -> TuneResult:
    folder.mkdir(exist_ok=True)
    return tune(configs, trials, 3600.0, folder / "r.jsonl", max_rounds=6)


def test_a_drift_shared_by_a_round_settles_the_search_by_its_pairs(tmp_path):
    """A 1.05x lead under a drift of +-30% between rounds: each candidate's own interval spans the drift, the pairs do
    not, so the search stops with the leader apart once the two ran a round together after the first."""
    configs, speeds = _configs(1050.0, 1000.0, 700.0, 600.0)
    result = _search(_Drifting(speeds), tmp_path, configs)
    assert result.best.config.label == "npy/dataloader"
    assert result.stopped == STOP_APART, result.stopped
    assert result.best.interval().overlaps(result.ranked[1].interval()), "the drift kept the own intervals apart"


def test_a_lead_that_contention_made_does_not_settle_the_search(tmp_path):
    """The runner-up waited for a CPU half its runnable time, the leader none: credited with that, a 1.05x lead is
    not one, and the search does not stop on it."""
    configs, speeds = _configs(1050.0, 1000.0, 700.0, 600.0)
    trials = _Drifting(speeds, waits={"npy/dataloader": (1.0, 0.0), "hdf5/dataloader": (1.0, 1.0)})
    result = _search(trials, tmp_path, configs)
    assert result.stopped != STOP_APART, result.stopped


def test_each_round_takes_the_candidates_in_a_fresh_order(tmp_path):
    """Four alike candidates, searched three times: the first round's order is not always the one they were given
    (a fixed order puts a drift within every round on the same candidate); a false failure has 1 chance in 576."""
    orders = set()
    for k in range(3):
        configs, speeds = _configs(1000.0, 1000.0, 1000.0, 1000.0)
        trials = _Drifting(speeds)
        _search(trials, tmp_path / str(k), configs)
        orders.add(tuple(trials.calls[:4]))
    assert len(orders) > 1, orders


def test_a_round_the_budget_will_cut_measures_the_leaders_first(tmp_path, monkeypatch):
    """A candidate 4x the others after the first round, and a budget that leaves room for one candidate of the second:
    that one is the leader, every time (taken in a fresh order, the leader waited at the end half the time and lost,
    ranked behind a slower candidate with more epochs; eight searches: a false pass has 1 chance in 256)."""
    import time
    import types

    import iobench.run.tune as tune_module

    clock = [0.0]
    monkeypatch.setattr(tune_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    for k in range(8):
        clock[0] = time.monotonic()  # where the search starts: its start is read from the real clock
        configs, speeds = _configs(4000.0, 1000.0, 1000.0, 1000.0)
        trials = _Drifting(speeds)

        def timed(config, epochs, max_seconds, trials=trials):
            identity, measure = _Drifting.trial(trials, config, epochs, max_seconds)

            def advancing():
                record = measure()
                clock[0] += sum(record.epochs.epoch_seconds)
                return record

            return identity, advancing

        trials.trial = timed  # type: ignore[method-assign]
        (tmp_path / str(k)).mkdir()
        result = tune(configs, trials, 4.3, tmp_path / str(k) / "r.jsonl")
        assert result.best.config.label == "npy/dataloader", (k, trials.calls)
