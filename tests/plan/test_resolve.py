"""What resolve settles of a configuration against its dataset: a batch larger than an epoch's share is fitted
(issue 79: a 500-sample dataset kept 1,024 and warned six times)."""

from __future__ import annotations

from iobench.plan.resolve import fitted_batch
from tests.conftest import run_config


def test_a_batch_larger_than_the_samples_is_fitted_to_eight_batches_or_more():
    config = run_config("npy", "dataloader", batch_size=1024)  # the default
    assert fitted_batch(config, 500).settings.batch_size == 32  # 500 // 8 = 62 -> 32
    assert fitted_batch(config, 5).settings.batch_size == 1
    assert fitted_batch(config, 1024) is config and fitted_batch(config, 200_000) is config
    given = run_config("npy", "dataloader", batch_size=4096)  # the user's own: kept, with the one-batch warning
    assert fitted_batch(given, 500) is given
