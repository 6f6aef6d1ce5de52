"""feed's most ranks (`iobench.sessions.feed._most`): where one rank does not fit the memory it would start anyway, its
own estimate saying so ("a rank takes about 48.0 GB ... and 21.8 GB is available", the eighth probe): refused in one
line instead."""

from __future__ import annotations

import pytest

from iobench.errors import IobenchError
from iobench.feed.workloads import custom
from iobench.sessions import feed
from iobench.sessions.feed import FeedRequest
from iobench.system.memory import MemoryRoom


def test_one_rank_that_does_not_fit_is_refused_and_one_that_does_is_counted(tmp_path, monkeypatch):
    request = FeedRequest(
        workload=custom(2**20, 8, 10.0, 0.9, 4),
        format="npy",
        loader="dataloader",
        data_dir=tmp_path,
        results=tmp_path / "f.jsonl",
        num_workers=256,
    )
    monkeypatch.setattr("iobench.system.memory.memory_room", lambda: MemoryRoom(2 * 10**9, 4 * 10**9, ""))
    with pytest.raises(IobenchError, match=r"^feed: one rank takes about .* GB .* and 2.0 GB is available; give fewer"):
        feed._most(request, 8 * 2**20, 10_000)
    monkeypatch.setattr("iobench.system.memory.memory_room", lambda: MemoryRoom(10**12, 10**12, ""))
    most, _ = feed._most(request, 8 * 2**20, 10_000)
    assert most >= 1
