"""`checkpoint --tune`'s code: every library and save mode it can hand over is a whole script; run in a fresh process
it saves as the trials do (the steady save timed), restores into a state of the right shapes exactly, removes what it
made, and fails (so the check says so) where its restore does not give back what was saved."""

from __future__ import annotations

import ast
import re

import pytest

from iobench.checkpoint.libraries import LIBRARIES
from iobench.checkpoint.paste import FIGURE_LINE, PASTED, checkpoint_script
from iobench.checkpoint.state import StateSpec
from iobench.run.paste_check import check_paste
from tests.conftest import assert_formatted

FIGURE = re.compile(re.escape(FIGURE_LINE) + r"([0-9.]+) s")
MODES = ("inplace", "safe", "keep:2")


def _script(tmp_path, library: str, mode: str, seconds: float = 0.05):
    text = checkpoint_script(library, mode, StateSpec(100_000), "durable in 0.05 s", seconds, str(tmp_path), 1, 2)
    path = tmp_path / f"{library}-{mode.replace(':', '-')}.py"
    path.write_text(text)
    return path, text


@pytest.mark.parametrize("library", PASTED)
def test_every_library_and_mode_is_a_whole_script_with_the_functions_to_paste(tmp_path, library):
    for mode in MODES:
        path, text = _script(tmp_path, library, mode)
        defined = {n.name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)}
        assert {"save_checkpoint", "finish_checkpoint", "restore_checkpoint"} <= defined
        assert ("remove_old" in defined) == (mode != "inplace")
        assert "import iobench" not in text.split('if __name__ == "__main__":')[0]  # the pasted part is the user's
        assert "pickle" not in text
        assert_formatted(path)  # as `ruff format` writes it, with its defaults (tune's script is held to it too)


@pytest.mark.parametrize(("library", "mode"), [("torch", "keep:2"), ("dcp-async", "safe"), ("dcp-threads", "inplace")])
def test_the_script_saves_restores_exactly_and_leaves_nothing(tmp_path, library, mode):
    path, text = _script(tmp_path, library, mode)
    check = check_paste(text, str(path), 120, FIGURE)
    assert check.figure is not None and check.figure > 0, check.said
    assert "restored exactly" in check.said
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # its checkpoint folder removed


def test_a_restore_that_gives_back_other_bytes_fails_the_check(tmp_path):
    path, text = _script(tmp_path, "torch", "safe")
    broken = text.replace("    _copy_into(state, torch.load(", "    0 and _copy_into(state, torch.load(", 1)
    check = check_paste(broken, str(path), 120, FIGURE)
    assert check.figure is None and "differs from the state saved" in check.said


def _functions(library: str, mode: str, tmp_path) -> dict:
    """The script's functions, as a user pastes them (its __main__ block not run)."""
    text = checkpoint_script(library, mode, StateSpec(20_000), "durable in 0.05 s", 0.05, str(tmp_path), 1, 2)
    space: dict = {"__name__": "pasted"}
    exec(compile(text, f"{library}-{mode}.py", "exec"), space)
    return space


CORE_PASTED = [lib for lib in PASTED if LIBRARIES[lib].extra == "checkpoint" and LIBRARIES[lib].needs is None]


@pytest.mark.parametrize("library", [*CORE_PASTED, "tensordict"])
def test_the_pasted_keep_code_never_removes_what_it_did_not_save_or_the_published_step(tmp_path, library):
    """The eighth probe's D1: remove_old counted every entry named step-N (an earlier run's steps, the user's own files)
    and removed the folder `latest` had just been pointed at; a planted link step-1 -> victim was written through. For
    every library and mode (safetensors' in the extras' file), against those folders: the new run's steps restore,
    nothing of others' is touched."""
    pasted_keep_code_keeps_what_is_not_its_own(tmp_path, library)


def pasted_keep_code_keeps_what_is_not_its_own(tmp_path, library: str) -> None:
    import os

    import torch

    from iobench.checkpoint.state import make_state

    for mode in MODES:
        root = tmp_path / mode.replace(":", "-") / "ck"
        root.mkdir(parents=True)
        fns = _functions(library, mode, tmp_path)
        earlier = fns["stand_in_state"](7)
        for step in (5000, 5001, 5002):  # an earlier run's steps, saved by this code (marked)
            fns["finish_checkpoint"](str(root), step, fns["save_checkpoint"](earlier, str(root), step))
        for name in ("step-100", "step-101", "step-102"):
            (root / name).write_text("the user's own file")
        victim = tmp_path / f"victim-{mode.replace(':', '-')}"
        victim.mkdir()
        (root / "step-2").symlink_to(victim)
        state = fns["stand_in_state"](0)
        assert all(
            torch.equal(a, b)
            for a, b in zip(fns["_tensors"](state), fns["_tensors"](make_state(StateSpec(20_000))), strict=True)
        )
        fns["finish_checkpoint"](str(root), 1, fns["save_checkpoint"](state, str(root), 1))
        if "remove_old" in fns:
            fns["remove_old"](str(root))
            with pytest.raises(FileExistsError, match="is a link"):
                fns["save_checkpoint"](state, str(root), 2)
            assert (root / "latest").read_text() == "step-1"
            assert {f"step-{n}" for n in (1, 5000, 5001, 5002)} <= set(os.listdir(root)), os.listdir(root)
        restored = fns["restore_checkpoint"](str(root), fns["_like"](state))
        assert all(torch.equal(a, b) for a, b in zip(fns["_tensors"](restored), fns["_tensors"](state), strict=True))
        assert [p.name for p in victim.iterdir()] == [], "nothing written through the planted link"
        assert all((root / f"step-{n}").read_text() == "the user's own file" for n in (100, 101, 102))


def test_the_pasted_script_runs_without_iobench(tmp_path):
    """A Python without iobench (92: `from iobench.api import training_state` failed with ModuleNotFoundError)."""
    import subprocess
    import sys

    _, text = _script(tmp_path, "torch", "keep:2")
    blocked = "import sys\nsys.modules['iobench'] = None  # `import iobench` fails from here on\n"
    done = subprocess.run(
        [sys.executable, "-I", "-c", blocked + text], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "restored exactly" in done.stdout
