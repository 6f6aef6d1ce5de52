"""tune over the formats' own pipelines and their library knobs, weighing shuffle quality: speed alone
would always pick the smallest shuffle buffer."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from iobench.events import Events
from iobench.loaders import LoaderName
from iobench.plan.paste import best_script
from iobench.results.record import RunRecord
from iobench.run.tune import Candidate, TuneResult, tune
from iobench.run.tune_candidates import candidates, knob_combinations
from tests.conftest import assert_formatted, format_param, invoke, record_of, run_config, run_pasted

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras


@pytest.mark.parametrize(
    ("fmt", "combos"),
    [
        format_param("webdataset", [(), (("shuffle_buffer", 10_000),)]),
        format_param("tfrecord", [(), (("shuffle_queue", 10_000),)]),
        format_param(
            "litdata",
            [
                (),
                (("item_shuffle_window", "full"),),
                (("batch_decode", "0"),),
                (("batch_decode", "0"), ("item_shuffle_window", "full")),
            ],
        ),
    ],
)
def test_the_native_candidates_try_every_knob_combination(fmt, combos):
    assert knob_combinations(fmt) == combos
    base = run_config(fmt, "dataloader", batch_size=256)
    found = [c for c in candidates(base, fmt, False, None, NATIVE_FIRST) if c.loader is LoaderName.NATIVE]
    assert {c.format_options for c in found} == set(combos)
    for c in found:
        assert c.settings.num_workers or c.settings.prefetch_factor is None, "no prefetch without workers"
        assert not c.settings.persistent_workers and c.settings.in_order
    plain = candidates(base, fmt, False, None, (LoaderName.DATALOADER,))
    assert not [c for c in plain if c.loader is LoaderName.NATIVE], "no native candidates unless asked"


class FakeTrials:
    """Records made up per candidate: (samples/s, shuffle spread, shuffle order) by its number of workers."""

    def __init__(self, figures: dict[int, tuple[float, float, float]]) -> None:
        self.figures, self.caps = figures, set()

    def trial(self, config, epochs, max_seconds):
        self.caps.add((epochs, max_seconds))
        rate, spread, order = self.figures[config.settings.num_workers]
        record = record_of(
            num_workers=config.settings.num_workers,
            samples_per_epoch=50_000,
            epoch_seconds=[50_000 / rate * (1 + 0.001 * k) for k in range(epochs)],
            shuffle_spread=spread,
            shuffle_order=order,
        )
        return (config.settings.num_workers, epochs), lambda: record


FIGURES = {0: (100_000.0, 0.05, 0.3), 1: (60_000.0, 1.0, 1.0), 2: (30_000.0, 0.99, 0.98)}


NATIVE_FIRST = (LoaderName.NATIVE, LoaderName.DATALOADER)  # tune's order on local files


def _search(tmp_path: Path, floor: float) -> TuneResult:
    configs = [run_config("npy", "dataloader", num_workers=w) for w in FIGURES]
    trials = FakeTrials(FIGURES)
    outcome = tune(configs, trials, 60, tmp_path / "r.jsonl", min_shuffle=floor)
    # the first round's epochs are cut at the budget over 4x the candidates (60 / 12 = 5 s); later ones are whole
    assert (1, 5.0) in trials.caps and all(cap is None for epochs, cap in trials.caps if epochs > 1)
    return outcome


def test_a_candidate_that_hardly_shuffles_is_never_recommended_over_one_that_does(tmp_path):
    gated = _search(tmp_path, 0.9)
    assert gated.best.config.settings.num_workers == 1, "the fastest of those that shuffle"
    assert [c.config.settings.num_workers for c in gated.ranked] == [1, 2, 0], "the gated one ranks last"
    assert gated.within_noise() == [] and gated.min_shuffle == 0.9
    speed_alone = _search(tmp_path / "again", 0.0)
    assert speed_alone.best.config.settings.num_workers == 0


def test_the_floor_allows_for_what_a_uniform_shuffle_scores_at_this_size():
    """A uniform shuffle of 300 samples scores down to 0.87 (rank correlation noise); of 50,000, 0.99."""
    small = Candidate(run_config("npy", "dataloader"), records=[_scored(300, 0.95, 0.87)])
    large = Candidate(run_config("npy", "dataloader"), records=[_scored(50_000, 0.95, 0.87)])
    assert small.meets(0.9) and not large.meets(0.9) and large.meets(0.0)
    assert Candidate(run_config("npy", "dataloader")).meets(0.9), "not yet measured: not gated"


def _scored(n: int, spread: float, order: float) -> RunRecord:
    return record_of(samples_per_epoch=n, shuffle_spread=spread, shuffle_order=order)


def _searched(tmp_path, name: str, figures: dict, script) -> object:
    """tune's session over fake trials, as far as its outcome (the search, the confirmation, the script written)."""
    from iobench.plan.place import RunPlace
    from iobench.run.tune import TuneSearch
    from iobench.sessions.tune import TuneRequest, _searched

    configs = [run_config("npy", "dataloader", num_workers=w) for w in figures]
    place = RunPlace(tmp_path, None, "cpu", tmp_path / name)
    request = TuneRequest(
        place=place,
        batch_sizes=[16],
        searched_sizes=False,
        budget_minutes=1.0,
        rounds=None,
        min_shuffle=0.9,
        check_paste=False,
    )
    return _searched(TuneSearch("npy", configs, FakeTrials(figures), script), request, Events())


def test_tune_says_when_nothing_shuffles_well_enough_and_names_the_fastest(tmp_path, capsys):
    from iobench.cli.render import print_tune

    figures = {w: (100_000.0 / (w + 1), 0.1, 0.2) for w in range(3)}
    tuned = _searched(tmp_path, "r.jsonl", figures, lambda *_: pytest.fail("nothing to paste"))
    assert tuned.result.stopped == "no candidate shuffled to 0.9" and tuned.script is None
    print_tune(tuned, tmp_path / "r.jsonl")
    printed = capsys.readouterr().out
    assert "no candidate shuffled to --min-shuffle 0.9" in printed and "paste" not in printed
    assert "0.10/0.20 < 0.9" in printed

    both = _searched(tmp_path, "r2.jsonl", FIGURES, lambda c, measured: f"# {c.settings.num_workers}\n")
    print_tune(both, tmp_path / "r2.jsonl")
    printed = capsys.readouterr().out
    # one epoch of it (it left the search after the first round): no interval, so not called the fastest outright
    assert (
        "measured faster at any shuffle, not told apart from the best: npy/dataloader bs=16 w=0: 100,000 samples/s, "
        "shuffle 0.05/0.30 < 0.9" in printed
    )
    assert "# 1" in printed, "the recommendation is the fastest that shuffles"


@pytest.mark.parametrize(
    ("fmt", "options"),
    [format_param("webdataset", (("shuffle_buffer", 10_000),)), format_param("litdata", (("batch_decode", "0"),))],
)
def test_a_pasted_native_pipeline_runs_under_spawn_and_delivers_the_dataset(tmp_path, fmt, options):
    invoke("prepare", "--size", "1000", "--data-dir", tmp_path / "data", "-q", "--formats", fmt)
    dataset = next((tmp_path / "data").iterdir())
    c = replace(run_config(fmt, "native", batch_size=128, num_workers=2, prefetch_factor=4), format_options=options)
    script = tmp_path / "best.py"
    script.write_text(best_script(c, "1 samples/s", dataset, "cpu"))
    text = script.read_text()
    assert "native_loader(" in text and "lambda" not in text
    assert "options={" + ", ".join(f'"{k}": {json.dumps(v)}' for k, v in options) + "}" in text
    assert_formatted(script)
    done = run_pasted(script, "spawn")
    assert done.returncode == 0, done.stderr
    assert re.findall(r"epoch \d: (\d+) samples", done.stdout) == ["1000"] * 3, done.stdout


@pytest.mark.parametrize("fmt", [format_param("webdataset"), format_param("litdata"), format_param("tfrecord")])
def test_native_loader_delivers_every_sample_once_with_its_values(tmp_path, fmt):
    from iobench.api import native_loader

    invoke("prepare", "--size", "700", "--data-dir", tmp_path / "data", "-q", "--formats", f"npy,{fmt}")
    folder = next((tmp_path / "data").iterdir())
    expected = np.load(folder / "npy" / "features.npy", allow_pickle=False)
    loader = native_loader(folder, fmt, batch_size=64, num_workers=1)
    epochs = [torch.cat([features for features, _ in loader]).numpy() for _ in range(2)]
    for delivered in epochs:
        assert len(delivered) == 700
        assert np.array_equal(delivered[np.lexsort(delivered.T[::-1])], expected[np.lexsort(expected.T[::-1])])
    assert not np.array_equal(*epochs), "a new shuffle each epoch"


def test_native_loader_refuses_an_unknown_knob(tmp_path):
    from iobench.api import native_loader
    from iobench.errors import IobenchError

    invoke("prepare", "--size", "100", "--data-dir", tmp_path / "data", "-q", "--formats", "npy")
    folder = next((tmp_path / "data").iterdir())
    with pytest.raises(IobenchError, match="npy has no read option 'buffer'"):
        native_loader(folder, "npy", batch_size=8, options={"buffer": 3})


@pytest.mark.parametrize("fmt", [format_param("webdataset"), format_param("zarr")])
def test_the_library_is_imported_before_workers_fork(tmp_path, fmt):
    """Workers forked each epoch imported the format's library again when the main process had not (datasets
    0.57 s a worker an epoch): `run` and the pasted script import it first, as a training script does."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    invoke("prepare", "--size", "64", "--data-dir", tmp_path / "data", "-q", "--formats", fmt)
    folder = next((tmp_path / "data").iterdir())
    code = (
        f"import sys; from iobench.api import open_dataset; assert {fmt!r} not in sys.modules; "
        f"open_dataset({str(folder)!r}, {fmt!r}); assert {fmt!r} in sys.modules, 'not imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
