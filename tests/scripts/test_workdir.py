"""The benchmark scripts keep the product's rules for what they remove (the seventh probe's S2): a work folder made
fresh, or a given one checked with `lstat` (a directory of this user's, not a link) before anything in it is removed;
"another user" plants names in a shared sticky folder as `nobody` (setpriv)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))
import workdir  # noqa: E402 - scripts/ is a folder of scripts, not a package

NOBODY = 65534


@pytest.fixture
def shared():
    """A folder every user may create names in, as /tmp is (sticky, 1777)."""
    folder = Path(tempfile.mkdtemp(dir="/tmp", prefix="iobench-shared-"))
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _as_nobody(*argv: str) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to act as a second user (setpriv)")
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]
    subprocess.run(cmd, check=True, timeout=30, cwd="/")


def test_a_planted_link_is_refused_and_what_it_points_to_is_kept(shared):
    """The probe's case: `/tmp/ckloops` planted by another user as a link to their folder holding `torch/precious`;
    the loops script refuses in one line before it removes or writes anything."""
    victim, planted = shared / "victim", shared / "ckloops"
    plant = f"mkdir -p {victim}/torch && echo mine > {victim}/torch/precious && ln -s {victim} {planted}"
    _as_nobody("sh", "-c", plant)
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPTS / "bench_checkpoint_loops.py"),
            "--params",
            "1e5",
            "--rounds",
            "1",
            "--libraries",
            "torch",
            "--dir",
            str(planted),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode != 0 and "it is a link" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert (victim / "torch" / "precious").read_text() == "mine\n"
    assert sorted(p.name for p in victim.iterdir()) == ["torch"]  # nothing written under the link's target


def test_another_users_folder_and_a_folder_of_the_users_files_are_refused(shared, tmp_path):
    theirs = shared / "theirs"
    _as_nobody("mkdir", str(theirs))
    with pytest.raises(SystemExit, match="belongs to uid 65534"):
        workdir.work_dir(theirs, "x-")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.csv").write_text("keep")
    with pytest.raises(SystemExit, match="holds files a script did not make"):
        workdir.work_dir(mine, "x-")
    assert (mine / "results.csv").read_text() == "keep"


def test_a_link_inside_the_work_folder_is_removed_itself_never_what_it_points_to(tmp_path):
    folder = workdir.work_dir(tmp_path / "work", "x-")
    outside = tmp_path / "outside"
    (outside / "torch").mkdir(parents=True)
    (outside / "torch" / "precious").write_text("mine")
    (folder / "torch").symlink_to(outside / "torch")
    workdir.remove_tree(folder / "torch")
    assert not os.path.lexists(folder / "torch") and (outside / "torch" / "precious").read_text() == "mine"
    (folder / "dcp").mkdir()
    (folder / "dcp" / "x").write_text("1")
    workdir.remove_tree(folder / "dcp")
    workdir.remove_work(folder)
    assert not folder.exists() and outside.exists()


def test_a_fresh_folder_is_private_and_removed_after():
    folder = workdir.work_dir(None, "iobench-test-")
    try:
        assert folder.parent == Path(tempfile.gettempdir()) and os.lstat(folder).st_mode & 0o777 == 0o700
    finally:
        workdir.remove_work(folder)
    assert not folder.exists()


def test_no_script_removes_a_folder_except_through_workdir():
    """Every Python script (in scripts/ and the studies) removes folders through `workdir` (the checks above), none by
    an `rmtree` of its own."""
    paths = [*SCRIPTS.glob("*.py"), *(ROOT / "docs" / "study").rglob("*.py")]
    found = [p.name for p in paths if p.name != "workdir.py" and "rmtree(" in p.read_text(encoding="utf-8")]
    assert found == []
