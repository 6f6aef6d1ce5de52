"""The marker that proves a folder is iobench's: a folder is stale only where its intact marker names a process of
this host, boot and PID namespace that is gone; a name, a link, a damaged or foreign marker prove nothing."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from iobench.system import ownership
from iobench.system.ownership import MARKER, Owner


def test_a_marked_folder_is_ours_while_we_run_and_stale_once_its_process_is_gone(tmp_path):
    ownership.mark(tmp_path)
    assert ownership.is_ours(tmp_path) and not ownership.stale(tmp_path)
    gone = tmp_path / "gone"
    gone.mkdir()
    ownership.mark(gone, replace(Owner.this_process(), pid=999999999, start=5))
    assert ownership.stale(gone) and not ownership.is_ours(gone)


@pytest.mark.parametrize(
    "marker",
    [
        b"",
        b"not json",
        b"[]",
        json.dumps({"host": "h"}).encode(),
        b"x" * 5000,
        json.dumps({"host": "h", "boot": "b", "pid_ns": "n", "pid": -1, "start": 5}).encode(),
    ],
    ids=["empty", "garbage", "a-list", "missing-fields", "too-large", "negative-pid"],
)
def test_a_damaged_marker_proves_nothing(tmp_path, marker):
    (tmp_path / MARKER).write_bytes(marker)
    assert ownership.owner_of(tmp_path) is None and not ownership.stale(tmp_path)


def test_a_marker_that_is_a_link_or_a_folder_that_is_a_link_proves_nothing(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    ownership.mark(real, replace(Owner.this_process(), pid=999999999, start=5))
    assert ownership.stale(real)
    (tmp_path / "link").symlink_to(real)
    assert not ownership.stale(tmp_path / "link")
    other = tmp_path / "other"
    other.mkdir()
    os.symlink(real / MARKER, other / MARKER)
    assert ownership.owner_of(other) is None


def test_a_process_of_another_host_boot_or_namespace_is_never_gone_here():
    me = Owner.this_process()
    for other in (replace(me, host=me.host + "x"), replace(me, boot="0"), replace(me, pid_ns="pid:[1]")):
        assert not replace(other, pid=999999999, start=5).gone()
    assert replace(me, pid=999999999, start=5).gone() and not me.gone()
