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
