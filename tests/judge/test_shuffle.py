"""One shuffle threshold (`iobench.judge.shuffle`): tune's --min-shuffle default, its candidates' floor and the report's
"uniform shuffle" decide alike; a score just under the threshold passes within the scores' noise at a small size and
not at a large one."""

from __future__ import annotations

import inspect

from iobench.judge.shuffle import UNIFORM_SHUFFLE, allowance, shuffles
from tests.conftest import record_of


def _scored(score: float, samples: int):
    return record_of(shuffle_spread=score, shuffle_order=1.0, samples_per_epoch=samples)


def test_the_threshold_allows_the_scores_own_noise():
    assert allowance(300) > 0.15 and allowance(10**7) < 0.012
    assert shuffles(_scored(UNIFORM_SHUFFLE - 0.1, 300)) and not shuffles(_scored(UNIFORM_SHUFFLE - 0.1, 10**6))
    assert shuffles(_scored(UNIFORM_SHUFFLE, 10**6)) and not shuffles(record_of(shuffle_spread=None))


def test_tune_and_the_report_use_the_one_threshold():
    from iobench.cli.tune import tune_cmd
    from iobench.report import formats_table
    from iobench.run import tune

    assert inspect.signature(tune_cmd).parameters["min_shuffle"].default == UNIFORM_SHUFFLE
    assert "shuffles(" in inspect.getsource(formats_table) and "shuffles(" in inspect.getsource(tune.Candidate.meets)
