"""`iobench feed --remote`: the dataset served once as S3 on loopback, every rank of every count reading it there
through `run --endpoint-url` (the keys in the ranks' environment), the store's own count of each count's requests
and bytes in the record, the server stopped after. Skipped, with the reason, where rclone or nginx is missing."""

from __future__ import annotations

import os

import pytest

from iobench.errors import IobenchError
from iobench.events import Events
from iobench.feed.workloads import custom
from iobench.report.feed import load_feed
from iobench.results.feed_record import runs_path
from iobench.results.store import read_records
from iobench.sessions.feed import FeedRequest, feed_session
from iobench.storage.remote.profiles import profile
from iobench.system.reaper import descendants
from tests.storage.test_emulator import _missing

pytestmark = [pytest.mark.skipif(_missing() is not None, reason=_missing() or ""), pytest.mark.extras]

SAMPLES, SAMPLE_BYTES = 256, 4096


def _request(tmp_path, **more) -> FeedRequest:
    (tmp_path / "data").mkdir(exist_ok=True)
    base = dict(
        workload=custom(SAMPLE_BYTES, 16, 10.0, 0.5, 0),
        format="npy",
        loader="dataloader",
        data_dir=tmp_path / "data",
        results=tmp_path / "r" / "feed.jsonl",
        size=SAMPLES,
        epochs=1,
        most=2,
        num_workers=0,
        remote=profile("none"),
    )
    return FeedRequest(**{**base, **more})


def test_every_count_reads_the_one_store_and_its_requests_are_the_stores_count(tmp_path):
    before = set(descendants(os.getpid()))  # what other tests of this session left running is not this one's
    done = feed_session(_request(tmp_path), Events())
    assert done.record is not None and done.record.store == "none" and done.record.cache == "warm"
    for point in done.record.points:
        # every sample read in the warm-up epoch and the measured one, each from the store: its bytes at least
        assert point.requests is not None and point.requests >= 1
        assert point.request_bytes is not None and point.request_bytes >= SAMPLES * SAMPLE_BYTES * 2
    assert load_feed(tmp_path / "r" / "feed.jsonl").records == [done.record]  # stored whole, read back the same
    runs = read_records(runs_path(tmp_path / "r" / "feed.jsonl"))
    assert runs and all(r.config.format == "npy" for r in runs)
    assert set(descendants(os.getpid())) - before == set()  # the server and its shaper stopped with the session


def test_a_store_and_a_cold_cache_or_two_stores_are_refused_in_one_line(tmp_path):
    with pytest.raises(IobenchError, match="from object storage read warm"):
        feed_session(_request(tmp_path, cache="cold"), Events())
    with pytest.raises(IobenchError, match="not with --remote"):
        _request(tmp_path, endpoint_url="http://127.0.0.1:9/b")
