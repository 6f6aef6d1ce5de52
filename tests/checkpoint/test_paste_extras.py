"""`checkpoint --tune`'s code for the libraries that come with the checkpoint extra: safetensors' and a TensorDict's
scripts restore exactly in a fresh process."""

from __future__ import annotations

import importlib.util

import pytest

from iobench.run.paste_check import check_paste
from tests.checkpoint.test_paste import FIGURE, _script

pytestmark = pytest.mark.extras


@pytest.mark.parametrize("library", ["safetensors", "tensordict"])
def test_the_flat_libraries_scripts_restore_exactly(tmp_path, library):
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed (pip install 'iobench[checkpoint]')")
    path, text = _script(tmp_path, library, "keep:2")
    check = check_paste(text, str(path), 120, FIGURE)
    assert check.figure is not None and "restored exactly" in check.said, check.said


def test_safetensors_pasted_keep_code_never_removes_what_it_did_not_save(tmp_path):
    from tests.checkpoint.test_paste import pasted_keep_code_keeps_what_is_not_its_own

    if importlib.util.find_spec("safetensors") is None:
        pytest.skip("safetensors is not installed (pip install 'iobench[checkpoint]')")
    pasted_keep_code_keeps_what_is_not_its_own(tmp_path, "safetensors")
