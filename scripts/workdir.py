"""The work folders of the benchmark scripts, under the product's rules: a folder a script writes into and removes
things from is made fresh (`mkdtemp`: 0700, a name nobody held) or, when given, checked with `lstat` to be a
directory of this user's and not a link before anything in it is removed. Another user can plant a fixed name
under /tmp as a link to a folder of theirs (the seventh probe's S2: `bench_checkpoint_loops.py --dir /tmp/ckloops`
deleted `VICTIM/torch/precious` through such a link). A folder given that does not exist is made, 0700; one that
exists is used only when it is empty or a script made it (its marker), so that a script never clears a user's folder.

    from workdir import work_dir, remove_tree
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

MARKER = ".iobench-script-work"  # written in a folder this module made: `remove_work` removes only those


def refuse(path: Path, why: str) -> None:
    sys.exit(f"{sys.argv[0]}: {path}: {why}; give a folder of yours, or leave the option out for a fresh one")


def check_ours(path: Path) -> None:
    """A directory, not a link, owned by this user: else the script ends in one line."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        refuse(path, exc.strerror or str(exc))
        return
    if stat.S_ISLNK(st.st_mode):
        refuse(path, "it is a link")
    elif not stat.S_ISDIR(st.st_mode):
        refuse(path, "it is not a folder")
    elif st.st_uid != os.geteuid():
        refuse(path, f"it belongs to uid {st.st_uid}")


def work_dir(given: Path | None, prefix: str) -> Path:
    """The folder to work in: a fresh one (None), or the one given, made (0700) or checked to be ours."""
    if given is None:
        folder = Path(tempfile.mkdtemp(prefix=prefix))
    else:
        folder = given
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            check_ours(folder)
            if not os.path.lexists(folder / MARKER) and any(os.scandir(folder)):
                refuse(folder, "it holds files a script did not make")
            (folder / MARKER).touch(mode=0o600)
            return folder
        except OSError as exc:
            refuse(folder, exc.strerror or str(exc))
    (folder / MARKER).touch(mode=0o600)
    return folder


def remove_tree(path: Path) -> None:
    """`path`, inside a folder already checked, removed: nothing if absent, the link itself (never what it points
    to) if a link, a folder only when it is this user's; its parent checked again first."""
    check_ours(path.parent)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    if st.st_uid != os.geteuid():
        refuse(path, f"it belongs to uid {st.st_uid}")
    shutil.rmtree(path)


def remove_work(folder: Path) -> None:
    """The work folder itself (it holds the marker `work_dir` wrote)."""
    check_ours(folder)
    if os.path.lexists(folder / MARKER):
        shutil.rmtree(folder)
