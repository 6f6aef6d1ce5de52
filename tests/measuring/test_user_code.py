"""The user's `module:function` (`--step`, `--dataset-factory`): imported from the working directory first, every
refusal one line naming it."""

from __future__ import annotations

import pytest

from iobench.errors import IobenchError
from iobench.measuring.user_code import is_reference, load_callable


@pytest.mark.parametrize(
    ("text", "ok"),
    [("pkg.mod:fn", True), ("mod:fn", True), ("mod", False), ("mod:", False), ("mod:1x", False), ("a..b:f", False)],
)
def test_a_reference_is_a_module_path_a_colon_and_an_identifier(text, ok):
    assert is_reference(text) is ok


def test_the_working_directory_is_read_first_and_each_refusal_names_the_code(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text("def step(batch):\n    return 1\nnot_callable = 3\n")
    (tmp_path / "broken.py").write_text("raise ValueError('half written')\n")
    (tmp_path / "quits.py").write_text("raise SystemExit(3)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_callable("mine:step", "--step")(None) == 1
    for text, said in [
        ("mine", "takes module:function"),
        ("absent_module_xyz:f", "cannot import absent_module_xyz"),
        ("mine:not_callable", "has no function not_callable"),
        ("broken:f", "ValueError: half written"),
        ("quits:f", "importing quits"),
    ]:
        with pytest.raises(IobenchError, match=said) as caught:
            load_callable(text, "--step")
        assert "\n" not in str(caught.value) and str(caught.value).startswith("--step")
