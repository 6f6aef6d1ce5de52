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


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001 - pytest's hook signature
    """The skipped tests' reasons, one line each with its count (-q prints an `s` per skip and no reason): what a
    newcomer's run left out, and the extra that would run it."""
    from collections import Counter

    reasons: Counter = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if reasons:
        terminalreporter.write_sep("-", f"{sum(reasons.values())} skipped, by reason")
        for reason, count in reasons.most_common():
            terminalreporter.write_line(f"{count:5d}  {reason}")
