"""`iobench feed` end to end on a tiny dataset of its own: each count measured as that many ranks, every rank's AU in
the record, the answer from the judgement; and no rank outlives feed, whatever signal ends it."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from iobench.events import Events
from iobench.feed.workloads import custom
from iobench.judge.feed import feed_verdict, record_answer
from iobench.report.feed import load_feed
from iobench.results.feed_record import runs_path
from iobench.results.store import read_records
from iobench.sessions.feed import FeedRequest, feed_session
from iobench.system.processes import python_module
from tests.process_tree import Watched, off_loopback

pytestmark = pytest.mark.long


def _request(tmp_path: Path, **more) -> FeedRequest:
    base = {
        "workload": custom(4096, 16, 20.0, 0.5, 0),
        "format": "npy",
        "loader": "dataloader",
        "data_dir": tmp_path / "data",
        "results": tmp_path / "r" / "feed.jsonl",
        "size": 512,
        "epochs": 1,
        "cache": "warm",
        "most": 2,
        "num_workers": 0,
    }
    (tmp_path / "data").mkdir(exist_ok=True)
    return FeedRequest(**{**base, **more})


def test_each_count_is_that_many_ranks_and_the_answer_is_the_judgements(tmp_path):
    done = feed_session(_request(tmp_path, what_if=(10.0,)), Events())
    assert 1 in done.points and done.answer is not None
    for n, point in done.points.items():
        assert len(point.rank_au) == n and all(len(epochs) == 1 for epochs in point.rank_au)
        assert all(0 < au <= 1 for epochs in point.rank_au for au in epochs)
        # and as DLIO counts it, each epoch's first step out: measured per rank and epoch, stored with the answer
        assert len(point.rank_au_after_first) == n and all(len(e) == 1 for e in point.rank_au_after_first)
    fed = [n for n, p in done.points.items() if feed_verdict(p, 0.5) == "fed"]
    assert done.answer.n == (max(fed) if fed else 0)
    assert done.answer.line.startswith("answer: ")
    # the answer's record, stored whole and decided again the same; each count's run beside it
    stored = load_feed(tmp_path / "r" / "feed.jsonl")
    assert stored.records == [done.record, *done.what_if] and record_answer(stored.records[0]) == done.answer
    # --what-if: the same search with the other step, its own record and runs
    (faster,) = done.what_if
    assert faster.compute_s == 0.01 and faster.identity()[:4] == done.record.identity()[:4]
    runs = read_records(runs_path(tmp_path / "r" / "feed.jsonl"))
    assert len(runs) == len(done.points) + len(faster.points)
    assert {r.config.step for r in runs} == {"sleep:20", "sleep:10"}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_rank_outlives_feed(tmp_path, signum):
    """A long step keeps the ranks running; the signal goes to feed's PID alone; the ranks' store listened on
    127.0.0.1 only."""
    (tmp_path / "data").mkdir()
    options = {
        "--workload": "custom",
        "--step-ms": "2000",
        "--batch-size": "16",
        "--sample-bytes": "4096",
        "--size": "512",
        "--data-dir": str(tmp_path / "data"),
        "--results": str(tmp_path / "r.jsonl"),
        "--cache": "warm",
        "--epochs": "3",
        "--num-workers": "1",
        "--max-accelerators": "2",
    }
    argv = python_module("iobench", "feed", *(x for pair in options.items() for x in pair), "--quiet")
    feed = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    watched = Watched(feed)
    try:
        watched.until(lambda w: len(w.seen) >= 2 and bool(w.listened))  # a rank and its worker, their store bound
        assert not off_loopback(watched.listened), off_loopback(watched.listened)
        feed.send_signal(signum)
        feed.communicate(timeout=60)
        assert not watched.survivors(), f"left running after {signal.Signals(signum).name}"
    finally:
        if feed.poll() is None:
            feed.kill()
            feed.communicate()


def test_a_workload_of_dlio_sizes_reads_files_of_them_and_counts_their_bytes(tmp_path):
    """unet3d's way, scaled: over files, a dataset of files of DLIO's sizes made for the workload (the small sample
    handed over); the demand and every count's MB/s in the bytes read, as the record stores them; over npy, the mean
    size, said."""
    from dataclasses import replace

    from iobench.data.dlio_records import Records
    from iobench.formats.files_layout import FilesOptions, file_sizes
    from iobench.spec import DatasetSpec

    records = Records(20_000, 6_000, 64)
    workload = replace(custom(20_000, 16, 20.0, 0.5, 0), records=records)
    said: list[str] = []

    class Said(Events):
        def say(self, text: str) -> None:
            said.append(text)

    events = Said()
    done = feed_session(_request(tmp_path, workload=workload, format="files", size=128, most=1), events)
    assert done.dataset_dir.name == "feed-custom-128-dlio-sizes"
    sizes = file_sizes(DatasetSpec(128, shape=(64,), dtype="uint8", n_classes=2), FilesOptions(**records.files_options))
    assert done.sample_bytes == round(sizes.mean()) + 8 == done.record.sample_bytes
    (run,) = read_records(runs_path(tmp_path / "r" / "feed.jsonl"))
    assert run.dataset.sample_bytes == done.sample_bytes and run.dataset.sample_shape == [64]
    assert done.points[1].mb_per_s == run.epochs.mb_per_s
    assert not any("mean" in line for line in said)
    mean = feed_session(_request(tmp_path, workload=workload, format="npy", size=128, most=1), events)
    assert mean.dataset_dir.name == "feed-custom-128" and mean.sample_bytes == 20_000 + 8
    assert any("every custom sample is its mean, 20,000 bytes" in line for line in said)
