"""Local ranks (`iobench.system.ranks`): the store and gloo on loopback only, the first failure stops the others, and
no rank outlives the process that started it, however that process ends (torchrun's store listened on `*:PORT` and its
workers ran on for 1,484 s after their launcher was stopped)."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import time

import pytest

from iobench.system.processes import python_code
from iobench.system.ranks import Ranks, run_ranks
from tests.process_tree import Watched, listeners, off_loopback

RANK = textwrap.dedent("""
    import os, sys, time
    from iobench.system.ranks import tie_to_parent
    tie_to_parent()
    import torch, torch.distributed as dist
    from iobench.system.world import join_group
    join_group("gloo", int(os.environ["RANK"]))
    t = torch.ones(1)
    dist.all_reduce(t)
    print("joined", int(t.item()), flush=True)
    if sys.argv[1:] == ["fail"] and dist.get_rank() == 1:
        os._exit(3)  # past gloo's teardown, which aborts a process that leaves its group without destroying it
    time.sleep(float(sys.argv[1]) if sys.argv[1:] and sys.argv[1] != "fail" else 0)
    dist.barrier()
""")


def _rank_argv(*args: str) -> list[str]:
    argv = python_code(RANK)
    return [*argv, *args]


@pytest.mark.long
def test_ranks_join_through_a_store_on_loopback_and_gloo_on_loopback():
    with Ranks(_rank_argv("3"), 2, capture=True) as ranks:
        seen: set = set()
        deadline = time.monotonic() + 60
        while {p.pid for p in ranks.procs} - {pid for pid, _, _ in seen} and time.monotonic() < deadline:
            seen |= listeners({p.pid for p in ranks.procs} | {__import__("os").getpid()})
            time.sleep(0.02)
        so_far: list[str] = []
        exits = ranks.wait(60, tick=lambda: so_far.append(ranks.output_so_far(0)))
    assert [e.code for e in exits] == [0, 0], [e.stderr[-2000:] for e in exits]
    assert all("joined 2" in e.stdout for e in exits)
    assert any("joined 2" in x for x in so_far), "rank 0's line was readable while it still ran (it sleeps 3 s after)"
    assert {pid for pid, _, _ in seen} >= {p.pid for p in ranks.procs}, "each rank's gloo socket was seen"
    assert seen and not off_loopback(seen), seen


def test_the_first_failed_rank_stops_the_others():
    started = time.monotonic()
    exits = run_ranks(_rank_argv("fail"), 2, capture=True, timeout_s=60)
    assert exits[1].code == 3 and exits[0].code != 0
    assert time.monotonic() - started < 30


@pytest.mark.long
def test_a_rank_past_the_timeout_is_stopped():
    with pytest.raises(TimeoutError):
        run_ranks(_rank_argv("60"), 2, capture=True, timeout_s=8)


PARENT = textwrap.dedent("""
    import sys
    from iobench.system.ranks import run_ranks
    run_ranks(sys.argv[1:], 2)
""")


@pytest.mark.long
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_rank_outlives_its_parent_whatever_ends_it(sig):
    """The parent alone is signalled (not its group): its ranks end with it."""
    proc = subprocess.Popen(
        [*python_code(PARENT), *_rank_argv("120")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    watched = Watched(proc)
    watched.until(lambda w: len(w.seen) >= 2 and all(listeners({pid}) for pid in w.seen))
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert not watched.survivors(), watched.survivors()


NOBODY = 65534


@pytest.mark.long
def test_the_store_is_a_file_no_other_user_can_open_and_no_port():
    """The eighth probe's S2: torch's TCPStore on 127.0.0.1 answered another user's raw client (keys read and written,
    a rank's gloo address overwritten). The ranks' store is a file in a 0700 folder of this user's: iobench listens on
    no port while they run, and a second user cannot open the file."""
    import os
    import shutil

    with Ranks(_rank_argv("4"), 2, capture=True) as ranks:
        deadline = time.monotonic() + 60
        while not all(listeners({p.pid}) for p in ranks.procs) and time.monotonic() < deadline:
            time.sleep(0.05)  # both ranks joined: gloo listens
        assert not listeners({os.getpid()}), "iobench itself listens on no port for its ranks"
        folder = ranks._folder
        store = os.path.join(folder, "store")
        assert os.path.isfile(store) and os.stat(folder).st_mode & 0o077 == 0
        if os.geteuid() == 0 and shutil.which("setpriv"):
            argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "cat", store]
            denied = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            assert denied.returncode != 0 and "Permission denied" in denied.stderr, denied
        exits = ranks.wait(60)
    assert [e.code for e in exits] == [0, 0], [e.stderr[-2000:] for e in exits]
    assert not os.path.exists(folder), "the store's folder is removed with the ranks"
