"""The MLPerf Storage rules check (`iobench.judge.rules`): each rule broken by a planted feed record is named with
what it would take, and kept where the record keeps it; iobench's own reader is never a CLOSED run's."""

from __future__ import annotations

from dataclasses import replace

from iobench.feed.workloads import closed_of
from iobench.judge.rules import feed_rules, rules_line
from iobench.results.record_parts import Environment
from tests.results.test_feed_record import planted

GIB = 1 << 30
UNET3D = closed_of("unet3d/h100")


def _keeping(**more):
    """A unet3d/h100 answer that keeps every rule iobench can keep: the workload's batch, step and AU, a dataset 5x the
    host's memory, 500 steps an epoch at the count fed (1)."""
    record = planted(
        {1: (0.95, 0.94), 2: (0.85, 0.84)},
        workload="unet3d/h100",
        sample_bytes=146_600_628,
        batch_size=7,
        compute_s=0.323,
        threshold=0.9,
        samples=3_500,
        environment=Environment(ram_bytes=64 * GIB),
    )
    return replace(record, **more)


def _verdicts(record) -> dict[str, bool]:
    return {c.rule: c.holds for c in feed_rules(record, closed_of(record.workload))}


def test_a_record_that_keeps_the_rules_iobench_can_keep_is_told_so():
    kept = _verdicts(_keeping())
    assert kept == {
        "workload": True,
        "format and loader": False,
        "dataset size": True,
        "epoch length": True,
        "runs": False,
    }


def test_each_rule_a_planted_record_breaks_is_named_with_what_it_would_take():
    step = _keeping(compute_s=0.1615)  # a --what-if answer: another accelerator's step
    assert _verdicts(step)["workload"] is False
    assert "unet3d_h100.yaml @7e73663b has batch 7, 323 ms, AU 0.90" in rules_line(step, UNET3D)
    small = _keeping(environment=Environment(ram_bytes=1024 * GIB))
    assert _verdicts(small)["dataset size"] is False
    assert "a CLOSED run needs 5x, 5,498 GB (6.6)" in rules_line(small, UNET3D)
    assert "read cold each epoch here" in rules_line(small, UNET3D)  # the planted answer read cold
    short = _keeping(samples=700)
    assert _verdicts(short)["epoch length"] is False
    assert "100 steps an epoch at 1 accelerator(s); a CLOSED run needs 500 (3,500 samples)" in rules_line(short, UNET3D)
    unknown = _keeping(environment=Environment())
    assert "the host's memory was not recorded" in rules_line(unknown, UNET3D)
    reader = rules_line(_keeping(), UNET3D)
    assert "npy read by dataloader; a CLOSED run reads npz through pytorch's loader in DLIO" in reader
    assert "the mean of 5 runs of 5 epochs after a warm-up run" in reader
    dlrm = closed_of("dlrm/h100")
    assert dlrm is not None and "the mean of 5 runs of 1 epoch after a warm-up run" in rules_line(_keeping(), dlrm)


def test_a_custom_workload_is_not_one_of_mlperfs():
    custom = _keeping(workload="custom/custom")
    assert rules_line(custom, closed_of(custom.workload)) == (
        "rules: not a CLOSED MLPerf Storage result: workload: custom/custom is not one of MLPerf Storage's workloads"
    )


def test_a_checkpoint_answer_names_the_checkpointing_rules_it_breaks():
    """Cold restores after durable saves keep the cache and fsync rules; three rounds are not MLPerf's ten, a
    generated state is not a llama3 checkpoint; warm restores break the cache rule."""
    from iobench.judge.rules import checkpoint_rules, checkpoint_rules_line
    from iobench.results.checkpoint_summary import rows_of
    from tests.results.test_checkpoint_summary import _trials

    rows = rows_of(_trials("torch", "safe", [1.0, 1.1, 1.2], [0.5, 0.6, 0.7]))
    kept = {c.rule: c.holds for c in checkpoint_rules(rows)}
    assert kept == {"workload": False, "fsync": True, "cache": True, "checkpoints": False, "runs": False}
    said = checkpoint_rules_line(rows)
    assert "checkpoints: 3 save(s) and restore(s) a library; a CLOSED run writes 10 and reads 10" in said
    assert "llama3-8b 105 GB" in said and "fsync" not in said
    warm = [replace(t, cache="warm") if t.op == "restore" else t for t in _trials("torch", "safe", [1.0], [0.5])]
    assert "restores read warm here; a CLOSED run clears the cache" in checkpoint_rules_line(rows_of(warm))
    ten = rows_of(_trials("torch", "safe", [1.0] * 10, [0.5] * 10))
    assert {c.rule: c.holds for c in checkpoint_rules(ten)}["checkpoints"] is True
