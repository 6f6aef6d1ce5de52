"""`checkpoint --tune`'s code: every library and save mode it can hand over is a whole script; run in a fresh process
it saves as the trials do (the steady save timed), restores into a state of the right shapes exactly, removes what it
made, and fails (so the check says so) where its restore does not give back what was saved."""

from __future__ import annotations

import ast
import re

import pytest

from iobench.checkpoint.paste import FIGURE_LINE, PASTED, checkpoint_script
from iobench.checkpoint.state import StateSpec
from iobench.run.paste_check import check_paste

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
        _, text = _script(tmp_path, library, mode)
        defined = {n.name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)}
        assert {"save_checkpoint", "finish_checkpoint", "restore_checkpoint"} <= defined
        assert ("remove_old" in defined) == (mode != "inplace")
        assert "import iobench" not in text.split('if __name__ == "__main__":')[0]  # the pasted part is the user's
        assert "pickle" not in text


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
