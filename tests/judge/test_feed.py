"""`feed`'s judgement: fed only where every rank kept the threshold in every measured epoch, starved where a rank was
below it in every epoch, undecided between (not counted fed); the bound named from the raw figures; a fraction of
one accelerator where one was not fed, with what it needs against what it got."""

from __future__ import annotations

from dataclasses import replace

import pytest

from iobench.judge.bounds import feed_bound
from iobench.judge.feed import FED, STARVED, UNDECIDED, FeedPoint, feed_answer, feed_verdict


def _point(n: int, *ranks: tuple[float, ...], **more) -> FeedPoint:
    return FeedPoint(n, tuple(ranks), more.pop("mb", 100.0), more.pop("wait", 5.0), **more)


def test_every_rank_in_every_epoch_decides_fed():
    assert feed_verdict(_point(2, (0.95, 0.93), (0.91, 0.92)), 0.9) == FED
    assert feed_verdict(_point(2, (0.95, 0.93), (0.89, 0.85)), 0.9) == STARVED  # one rank below in each epoch
    assert feed_verdict(_point(2, (0.95, 0.93), (0.95, 0.85)), 0.9) == UNDECIDED
    assert feed_verdict(_point(1), 0.9) == STARVED  # no rank measured is no evidence of feeding


def test_the_bound_is_named_from_the_figures():
    storage = _point(
        3,
        (0.5,),
        mb=950.0,
        percent_of_limit=92.0,
        limit_name="the disk's sequential read",
        limit_mb_per_s=1030.0,
        cpu_utilisation=0.95,
    )
    assert feed_bound(storage).startswith("the storage: 950 MB/s read, 92% of the disk's sequential read")
    assert feed_bound(_point(3, (0.5,), percent_of_limit=20.0, cpu_utilisation=0.97)).startswith("the CPU")
    loader = feed_bound(_point(3, (0.5,), percent_of_limit=20.0, cpu_utilisation=0.3, wait=40.0))
    assert loader.startswith("the loader's hand-over: 40 ms waited a batch")
    counted = replace(_point(1, (0.3,), cpu_utilisation=0.6, wait=39.0), requests=997, request_bytes=5_089_305)
    assert feed_bound(counted) == (
        "the loader's hand-over from object storage: 39 ms waited a batch, 997 requests (5.1 MB sent), "
        "the cores 60% busy"
    )


def test_the_answer_names_n_the_next_and_a_fraction_where_one_is_not_fed():
    points = {
        1: _point(1, (0.99, 0.99), mb=70.0),
        2: _point(2, (0.97, 0.96), (0.95, 0.95), mb=140.0),
        3: _point(3, (0.7, 0.7), (0.6, 0.7), (0.7, 0.7), mb=150.0, cpu_utilisation=0.99),
    }
    said = feed_answer(points, 0.9, "h100", 71.0, 16, "--max-accelerators 16")
    assert said.n == 2 and said.line.startswith("answer: 2 h100 accelerator(s) fed")
    assert "least 0.950" in said.line and "at 3: AU 0.650 (starved), bound by the CPU" in said.line
    one = feed_answer({1: _point(1, (0.3, 0.31), mb=950.0)}, 0.9, "h100", 3177.0, 16, "")
    assert one.n == 0 and one.line.startswith("answer: 0.30 of one h100") and "needs 3,177 MB/s and got 950" in one.line
    most = feed_answer({1: points[1], 2: points[2]}, 0.9, "h100", 71.0, 2, "a rank holds 9 GB of batches")
    assert most.n == 2 and "3 not measured: a rank holds 9 GB" in most.line


def test_an_epochs_first_batch_is_named_where_it_weighs():
    slow = _point(2, (0.85, 0.86), (0.85, 0.86), first_batch_share=0.08)
    said = feed_answer({1: _point(1, (0.95, 0.95)), 2: slow}, 0.9, "h100", 71.0, 16, "").line
    assert "an epoch's first batch took 8% of it" in said
    quick = _point(2, (0.85, 0.86), (0.85, 0.86), first_batch_share=0.01)
    assert "first batch" not in feed_answer({1: _point(1, (0.95, 0.95)), 2: quick}, 0.9, "h100", 71.0, 16, "").line


def test_a_change_of_n_is_called_only_where_the_count_between_moved_beyond_the_drift():
    from iobench.judge.change import NO_DIFFERENCE, NOT_COMPARABLE
    from iobench.judge.feed_change import FEWER, MORE, feed_change
    from tests.results.test_feed_record import planted

    four = planted({1: (0.95, 0.95), 2: (0.94, 0.94), 4: (0.93, 0.92), 8: (0.6, 0.61), 6: (0.7, 0.71), 5: (0.8, 0.8)})
    two = planted({1: (0.95, 0.95), 2: (0.93, 0.94), 4: (0.61, 0.62), 3: (0.7, 0.72)})
    fewer = feed_change(four, two)
    assert (fewer.kind, fewer.n_a, fewer.n_b) == (FEWER, 4, 2) and "at 4" in fewer.reason  # 0.925 -> 0.615
    assert feed_change(two, four).kind == MORE
    # one count apart on AU within the drift between minutes: noise, not a change
    three = planted({1: (0.95, 0.95), 2: (0.93, 0.94), 4: (0.88, 0.87), 3: (0.91, 0.92)})
    edge = feed_change(three, planted({1: (0.95, 0.95), 2: (0.93, 0.94), 3: (0.89, 0.88)}))
    assert (edge.kind, edge.n_a, edge.n_b) == (NO_DIFFERENCE, 3, 2) and "within the 30%" in edge.reason
    assert feed_change(two, two).kind == NO_DIFFERENCE and "both answer 2" in feed_change(two, two).reason
    # beside other programs on one side only: not comparable; another loader: not the same question
    busy = planted({1: (0.95, 0.95), 2: (0.93, 0.94), 4: (0.61, 0.62), 3: (0.7, 0.72)}, others=1.6)
    assert feed_change(four, busy).kind == NOT_COMPARABLE and "cores beside A" in feed_change(four, busy).reason
    from dataclasses import replace

    assert feed_change(four, replace(two, loader="spdl")).kind == NOT_COMPARABLE
    # B stopped at the most it could start: fewer is no evidence of slower storage
    capped = replace(two, most=2, why_most="a rank takes about 9 GB")
    assert feed_change(four, capped).kind == NOT_COMPARABLE and "no more than 2" in feed_change(four, capped).reason


def test_what_if_says_the_answer_measured_with_the_other_step_beside_the_workloads():
    from dataclasses import replace

    from iobench.judge.feed import what_if_line
    from tests.results.test_feed_record import planted

    base = planted({1: (0.95, 0.95), 2: (0.93, 0.94), 4: (0.61, 0.62), 3: (0.7, 0.72)})
    faster = replace(planted({1: (0.93, 0.93), 2: (0.7, 0.7)}), compute_s=0.0515)
    said = what_if_line(base, faster)
    assert said.startswith("what if a batch's compute took 51.5 ms (2.00x faster than 103): 1 h100")
    assert said.endswith("(measured; 2 at the workload's step)")


def test_other_programs_cpu_is_never_the_ranks_bound_and_is_named_in_the_answer():
    """Issue 91: feed said "bound by the CPU: the cores 86% busy" while its records held other programs at 1.5-2.0 of
    2 cores (the machine's /proc/stat, not its own processes)."""
    theirs = _point(2, (0.5,), cpu_utilisation=0.95, others_cores=1.6, own_cores=0.3, cpu_wait_share=0.45)
    assert feed_bound(theirs).startswith("other programs' CPU: they used 1.6 cores and the ranks 0.3")
    assert "the ranks waiting for a CPU 45%" in feed_bound(theirs)
    own = _point(2, (0.5,), cpu_utilisation=0.95, others_cores=0.1, own_cores=1.8, cpu_wait_share=0.05)
    assert feed_bound(own).startswith("the CPU: its processes used 1.8 cores")
    answer = feed_answer({1: _point(1, (0.95,), others_cores=1.2), 2: theirs}, 0.9, "h100", 50, 8, "")
    assert "bound by other programs' CPU: they used 1.6 cores" in answer.line and "beside other" not in answer.line
    storage = _point(2, (0.5,), percent_of_limit=95.0, limit_name="disk", limit_mb_per_s=100.0, others_cores=1.6)
    storage = replace(storage, cpu_wait_share=0.45)
    answer = feed_answer({1: _point(1, (0.95,), others_cores=1.2), 2: storage}, 0.9, "h100", 50, 8, "")
    assert "bound by the storage" in answer.line
    assert "beside other programs using up to 1.6 cores (at 2, the ranks waiting for a CPU 45%" in answer.line


def _with_dlio(record, after: dict[int, float], start: float = 0.4):
    """The record with each count's every rank and epoch at `after[n]` as DLIO counts it, its first batch `start` of
    an epoch."""
    from dataclasses import replace

    points = [
        replace(p, rank_au_after_first=tuple((after[p.n],) * len(r) for r in p.rank_au), first_batch_share=start)
        for p in record.points
    ]
    return replace(record, points=points)


def test_au_counted_as_dlio_counts_it_ranks_with_rules_dlio_and_is_said_beside_feeds():
    """A small dataset's epoch start weighs: feed's whole-epoch AU starves 2 where DLIO's (first step out) feeds it.
    The answer ranks by its rules and says the other's N, and why; two answers counted two ways are not compared."""
    from dataclasses import replace

    from iobench.judge.feed import DLIO_RULES, dlio_au, record_answer
    from iobench.judge.feed_change import feed_change
    from tests.results.test_feed_record import planted

    feed = _with_dlio(planted({1: (0.92, 0.93), 2: (0.78, 0.79), 3: (0.6, 0.6)}), {1: 0.98, 2: 0.97, 3: 0.7})
    assert dlio_au(feed.points[1]) == 0.97
    said = record_answer(feed)
    assert said.n == 1 and "`--rules dlio`" in said.line and "counted as DLIO counts it" in said.line, said.line
    assert ", 2 (`--rules dlio`): an epoch's first batch took up to 40%" in said.line, said.line
    dlio = replace(feed, rules=DLIO_RULES)
    answer = record_answer(dlio)
    assert answer.n == 2 and "counted as DLIO counts it: 0.970" in answer.line and "`--rules feed`" in answer.line
    assert feed_change(feed, dlio).kind == "not comparable"


def test_answers_made_before_dlio_figures_say_nothing_of_them():
    from iobench.judge.feed import record_answer
    from tests.results.test_feed_record import planted

    assert "--rules" not in record_answer(planted({1: (0.92, 0.93), 2: (0.78, 0.79)})).line


def test_an_answer_at_the_thresholds_edge_says_so_however_it_falls():
    """The same question asked three times quiet gave N=1 at AU 0.902, 0.904 and 0.896: fed twice and not once. Each
    answer names the edge, so the two answers no longer contradict each other silently."""
    for au in (0.902, 0.904, 0.896):
        points = {1: _point(1, (au, au)), 2: _point(2, (0.80, 0.80), (0.80, 0.80))}
        said = feed_answer(points, 0.9, "h100", 71.0, 16, "").line
        assert f"at the edge: 1 at AU {au:.3f}, within 0.02 of 0.90" in said, said
        assert ("the answer may be 0" if au >= 0.9 else "the answer may be 1") in said
    clear = {1: _point(1, (0.95, 0.95)), 2: _point(2, (0.80, 0.80), (0.80, 0.80))}
    assert "at the edge" not in feed_answer(clear, 0.9, "h100", 71.0, 16, "").line
    starved_near = {1: _point(1, (0.95, 0.95)), 2: _point(2, (0.89, 0.89), (0.89, 0.89))}
    assert "2 at AU 0.890" in feed_answer(starved_near, 0.9, "h100", 71.0, 16, "").line


def test_a_count_starved_beside_other_programs_that_its_waits_explain_is_undecided():
    """Beside one busy loop a rank that used a third of a core kept AU 0.887 (0.942-0.947 quiet): its processes
    waited for a CPU 31% of their runnable time, which given back could carry it over 0.90. Quiet, or where the waits
    cannot explain the shortfall, starved stays starved."""
    from iobench.judge.feed import credited_au

    busy = _point(1, (0.887, 0.887), others_cores=1.0, own_cores=0.33, cpu_wait_share=0.31)
    assert feed_verdict(busy, 0.9) == UNDECIDED and credited_au(busy) == 1.0
    said = feed_answer({1: busy}, 0.9, "h100", 160.0, 6, "").line
    assert "undecided beside other programs: they used 1.0 cores and its processes waited for a CPU 31%" in said
    quiet = replace(busy, others_cores=0.0)
    assert feed_verdict(quiet, 0.9) == STARVED and credited_au(quiet) is None
    far = _point(1, (0.5, 0.5), others_cores=1.0, own_cores=0.33, cpu_wait_share=0.31)
    assert feed_verdict(far, 0.9) == STARVED  # 0.5 / 0.85: the waits do not explain it


def test_beside_other_programs_the_others_share_of_a_step_loops_wait_is_given_back():
    """Beside one busy loop (Intel Xeon 2 vCPU, 40 ms step) a rank measured AU 0.899 with its step loop waiting for a
    CPU 6.9% of the epoch; quiet it kept 0.943-0.949. The loop is the epoch's critical path, so the others' share of
    that wait comes back: with 0.3 cores of its own and 1.0 of theirs on 2 cores, 1 - (0.3 / 1.3)^2 = 95% of it, so
    0.899 / (1 - 0.95 x 0.069) = 0.96: undecided, never fed (beside two loops such credit called counts of 3 and 4
    fed that quiet starved at one), and the answer says both figures. Quiet nothing is given back; a loop that
    hardly waited is not rescued; records without the loops' waits or the cores are judged as before; where the
    count's own processes held most of the CPU, little of the wait is the others'."""
    from iobench.judge.feed import judged_au, loop_credited, others_share

    busy = _point(1, (0.899, 0.899), others_cores=1.0, own_cores=0.3, cores=2, rank_loop_wait=((0.069, 0.069),))
    assert abs(others_share(busy) - (1 - (0.3 / 1.3) ** 2)) < 1e-9
    assert feed_verdict(busy, 0.9) == UNDECIDED and 0.96 < judged_au(busy) < 0.965
    said = feed_answer({1: busy}, 0.9, "h100", 160.0, 6, "").line
    assert (
        said.startswith("answer: 0.90 of one h100 (AU 0.899 as measured; 0.962 with other programs' share")
        and "(a loop waited up to 6.9%" in said
        and "undecided beside other programs" in said
    )
    assert "95% of it theirs: they used 1.0 cores beside the ranks' 0.3 on 2" in said
    quiet = replace(busy, others_cores=0.0)
    assert loop_credited(quiet) is None and feed_verdict(quiet, 0.9) == STARVED and judged_au(quiet) == 0.899
    barely = replace(busy, rank_au=((0.88, 0.88),), rank_loop_wait=((0.005, 0.005),))
    assert feed_verdict(barely, 0.9) == STARVED
    for before in (replace(busy, rank_loop_wait=()), replace(busy, cores=None)):
        assert loop_credited(before) is None and feed_verdict(before, 0.9) == STARVED
    # mostly the ranks' own contention: 1 - (1.9 / 2.2)^2 = 25% of the wait given back, 0.880 -> 0.895
    mine = replace(busy, rank_au=((0.88, 0.88),), others_cores=0.3, own_cores=1.9)
    assert loop_credited(mine) is not None and feed_verdict(mine, 0.9) == STARVED


def test_beside_other_programs_a_loader_workers_wait_is_given_back_up_to_the_time_the_loop_was_blocked():
    """A worker's wait for a CPU delays its batches; the loop waited for them no longer than it was blocked (not
    stepping, not on a CPU, not waiting for one: 1 - AU - its CPU - its wait). A rank at 0.89 whose loop waited 1% and
    ran 2% of the epoch, and whose worker waited 3%, 95% of it theirs, is undecided once both are given back, starved
    with the loop's alone; where the loop ran all of the time it did not step, the worker's wait gives back nothing;
    answers without the workers' waits are judged by the loops' alone."""
    from iobench.judge.feed import critical_wait, judged_au

    point = _point(
        1,
        (0.89, 0.89),
        others_cores=1.0,
        own_cores=0.3,
        cores=2,
        rank_loop_wait=((0.01, 0.01),),
        rank_worker_wait=((0.03, 0.03),),
        rank_loop_cpu=((0.02, 0.02),),
    )
    assert feed_verdict(point, 0.9) == UNDECIDED and 0.92 < judged_au(point) < 0.93
    assert feed_verdict(replace(point, rank_worker_wait=()), 0.9) == STARVED
    assert feed_verdict(replace(point, rank_loop_cpu=((0.1, 0.1),)), 0.9) == STARVED
    assert critical_wait(0.89, 0.01, 0.5, 0.02) == pytest.approx(0.09)
    assert critical_wait(0.89, 0.01, 0.03, 0.02) == pytest.approx(0.04)
    said = feed_answer({1: point}, 0.9, "h100", 160.0, 6, "").line
    assert "a loop waited up to 1.0% of an epoch, a loader worker up to 3.0%" in said
