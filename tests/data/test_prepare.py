"""Where prepare writes (`iobench.data.prepare`): a dataset's folder is never used through a link or when another user
owns it (the eighth probe's W1: feed's predictable `data/feed-custom-3000` planted as a link to another user's
folder), and a refused or failed prepare leaves no folder it made."""

from __future__ import annotations

import os

import pytest

from iobench.data.prepare import check_dataset_folder
from iobench.data.spec_options import SpecOptions
from iobench.errors import IobenchError
from iobench.events import Events
from iobench.sessions.prepare import PrepareRequest, prepare_session


def _prepare(data_dir, dataset="d", size="64"):
    spec = SpecOptions(size=size, shape="16", dtype="uint8", classes=2)
    return prepare_session(PrepareRequest(spec, "npy", data_dir, dataset), Events())


def test_a_dataset_folder_that_is_a_link_is_refused_and_nothing_is_written_through_it(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "d").symlink_to(victim)
    with pytest.raises(IobenchError, match=r"is a link; give --data-dir the folder it points to"):
        _prepare(tmp_path / "data")
    assert list(victim.iterdir()) == []


def test_a_dataset_folder_of_another_user_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(IobenchError, match="belongs to uid 65534, not to you"):
        check_dataset_folder(theirs)
    with pytest.raises(IobenchError, match="is not a folder"):
        (tmp_path / "afile").write_text("x")
        check_dataset_folder(tmp_path / "afile")


def test_a_refused_prepare_leaves_no_data_folder_it_made(tmp_path, monkeypatch):
    """The probe's smaller case: a failed feed prepare left an empty `data/`."""
    import iobench.data.prepare as prepare

    def no_room(request, dataset_dir):
        raise IobenchError("not enough free space (planted)")

    monkeypatch.setattr(prepare, "_check_free_space", no_room)
    with pytest.raises(IobenchError, match="planted"):
        _prepare(tmp_path / "data" / "deeper")
    assert list(tmp_path.iterdir()) == []
