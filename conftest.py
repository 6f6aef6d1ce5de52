"""Loaded by pytest before tests/conftest.py: stop at once, in one line, under the wrong interpreter."""

import importlib.util
import sys

import pytest

# A `pytest` of another Python than the one iobench was installed into (on these machines a bare
# `pytest` is pyenv's, without torch) would fail deep inside the tests' imports instead.
_MISSING = [m for m in ("torch", "iobench") if importlib.util.find_spec(m) is None]
if _MISSING:
    pytest.exit(
        f"{' and '.join(_MISSING)} not installed for {sys.executable}; run the README's test command, which "
        "installs and tests with one interpreter: python -m pip install torch==2.13.0 && "
        "python -m pip install -e '.[test]' && python -m pytest -q",
        returncode=4,
    )
