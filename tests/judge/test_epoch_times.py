"""What a configuration's epoch times say of themselves (`iobench.judge.epoch_times`)."""

from iobench.judge.epoch_times import first_run_slow, outliers, two_groups


def test_an_outlier_is_far_from_a_tight_series_not_a_few_percent_off_it():
    assert outliers([1.0, 1.01, 0.99, 1.0, 5.0]) == [4]
    assert outliers([1.0, 1.0, 1.0]) == [] and outliers([48.8, 49.76, 49.83]) == []
    assert outliers([48.8, 49.76, 49.83, 49.7, 49.75]) == [], "2% off a tight series is not an outlier"


def test_a_slow_first_epoch_is_beyond_the_others_spread():
    assert first_run_slow([2.0, 1.0, 1.0, 1.01]) and not first_run_slow([1.0, 1.0, 1.01])


def test_two_groups_are_a_jump_of_the_gap_between_sorted_times():
    assert two_groups([1.0, 1.1, 2.5, 2.6]) == ([1.0, 1.1], [2.5, 2.6])
    assert two_groups([1.0, 1.2, 1.4]) is None
