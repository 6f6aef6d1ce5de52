"""Warnings and labels true to the record: a first-epoch warning only when the first epoch is slower than every later
one, a bimodal series named as two regimes, ceilings in words, and the decoder the record names."""

from __future__ import annotations

from iobench.judge.warnings import Kind, record_warnings, series_warnings
from iobench.plan.labels import settings_label
from iobench.results.limits import ceiling_words
from tests.report.test_answer import record


def test_the_first_epoch_warning_needs_the_first_to_be_slower_than_every_later_one():
    """0.995, 0.062, 1.308 s was called "a caching effect" (the third is the slowest; the "median" was a mean)."""
    kinds = [w.kind for w in series_warnings("x", [0.995, 0.062, 1.308])]
    assert Kind.FIRST_SLOW not in kinds
    assert Kind.FIRST_SLOW in [w.kind for w in series_warnings("x", [2.0, 0.5, 0.52, 0.51])]


def test_two_groups_of_epochs_are_named_as_two_regimes_not_a_spread():
    (spread,) = [w for w in series_warnings("x", [0.995, 0.062, 1.308, 0.07]) if w.kind is Kind.SPREAD]
    assert "two groups (0.062-0.070 s and 0.995-1.308 s)" in spread.finding and "other programs" in spread.finding
    (plain,) = [w for w in series_warnings("x", [1.0, 1.4, 1.8, 1.2]) if w.kind is Kind.SPREAD]
    assert "vary by" in plain.finding


def test_ceilings_are_named_in_words():
    """The report's answer said "24% of memory_gather_mb_per_s"."""
    assert ceiling_words("memory_gather_mb_per_s") == "the in-memory gather of these samples"
    assert "connection" in ceiling_words("remote_sample_gets_16_connections")
    above = record([0.1, 0.1, 0.1], limit_name="memory_gather_mb_per_s", limit_mb_per_s=1.0, percent_of_limit=300.0)
    finding = next(w.finding for w in record_warnings([above]) if w.kind is Kind.ABOVE_CEILING)
    assert "_mb_per_s" not in finding and "in-memory gather" in finding


def test_a_decode_label_says_what_decoded_and_where():
    """--decode-on device on a CPU machine without torchvision was labelled decode@device while Pillow decoded on the
    host."""
    pillow = record(
        [0.1, 0.1, 0.1],
        format="files",
        decode_on="device",
        decoder="Pillow 12.0.0 on the host, after the hand-over (torchvision does not import)",
    )
    assert "decode: Pillow on host" in settings_label(pillow) and "decode@device" not in settings_label(pillow)
    # in prose too (warnings, answers, compare): `decode@device` is a key, never said (issue 79)
    assert "decode: Pillow on host" in settings_label(pillow, measured=False)
    assert "decode@device" not in " ".join(w.console() for w in record_warnings([pillow]))
    nvjpeg = record(
        [0.1, 0.1, 0.1],
        format="files",
        decode_on="device",
        device="cuda:0",
        decoder="torchvision 0.28.0 decode_jpeg on cuda:0 (nvJPEG; PNG on the host)",
    )
    assert "decode: torchvision on cuda:0" in settings_label(nvjpeg)


def test_the_first_epoch_warning_fires_only_beyond_the_others_spread():
    """Every default warm run printed "the first epoch ... is much slower than the rest: a caching effect": a first
    timed epoch 1.3x the median of others that spread as far is no caching effect."""
    from iobench.judge.epoch_times import first_run_slow

    assert not first_run_slow([0.13, 0.10, 0.126])  # within the others' own spread (1.0-1.26x)
    assert not first_run_slow([0.2, 0.1])  # one other epoch says nothing of a spread
    assert first_run_slow([0.3, 0.10, 0.11, 0.105])  # far beyond it
    kinds = [w.kind for w in record_warnings([record([0.13, 0.10, 0.126])])]
    assert Kind.FIRST_SLOW not in kinds


def test_a_finding_repeated_across_configurations_is_said_once_with_its_count():
    from iobench.judge.warnings import summarised

    found = [w for k in range(6) for w in record_warnings([record([0.1, 0.1, 0.1], batch_size=1024, num_workers=k)])]
    said = summarised(found, 6)
    one_batch = [w for w in said if w.kind is Kind.ONE_BATCH]
    assert len(one_batch) == 1 and one_batch[0].subject == "6 of 6 configurations"
