"""Where the command line writes: tables and results on stdout, messages and progress on stderr."""

from __future__ import annotations

import os
import sys

from rich.console import Console

# Not a terminal (a log, a pipe): wide enough for the tables rather than rich's 80 columns.
_WIDTH = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "180"))

# markup off: paths and values are printed as they are ("data[1]" is not a style tag).
out = Console(width=_WIDTH, markup=False)

err = Console(stderr=True, width=None if sys.stderr.isatty() else int(os.environ.get("COLUMNS", "180")), markup=False)


def say(text: str) -> None:
    """One message on stderr, printed as it is (paths may hold [brackets] that rich would read as markup)."""
    err.print(text, highlight=False, soft_wrap=True, markup=False)


def announce_limits() -> None:
    say("no stored limits for this machine and disk: measuring them once (`iobench limits`)")


def reporter(quiet: bool):  # noqa: ANN201 - a RichReporter or NullReporter, imported when used
    """Progress bars on stderr for the long steps, or nothing with --quiet."""
    from iobench.progress import make_reporter

    return make_reporter(quiet, err)
