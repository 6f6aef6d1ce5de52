def test_au_after_first_leaves_the_first_step_out():
    """DLIO's count: a 1 s epoch of 4 steps of 0.1 s whose first batch came at 0.5 s: (0.4 - 0.1) / (1 - 0.5 - 0.1)."""
    from iobench.measuring.aggregate import au_after_first

    epoch = {"batches": 4, "step_seconds": 0.4, "seconds": 1.0, "first_batch_seconds": 0.5}
    assert abs(au_after_first(epoch) - 0.75) < 1e-9
    assert (
        au_after_first({**epoch, "batches": 1}) == 0.0 and au_after_first({**epoch, "first_batch_seconds": 0.95}) == 0
    )
