"""Where the command line writes: tables and results on stdout, messages and progress on stderr."""

from __future__ import annotations

import os
import sys
from contextlib import AbstractContextManager

from rich.console import Console

from iobench.events import Events
from iobench.progress import Reporter

# Not a terminal (a log, a pipe): wide enough for the tables rather than rich's 80 columns.
_WIDTH = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "180"))

# markup and emoji codes off: paths and values are printed as they are ("data[1]" is not a style tag,
# "mod:x:" is not an emoji).
out = Console(width=_WIDTH, markup=False, emoji=False)

err = Console(
    stderr=True,
    width=None if sys.stderr.isatty() else int(os.environ.get("COLUMNS", "180")),
    markup=False,
    emoji=False,
)


LIMITS_MESSAGE = "no stored limits for this machine and disk: measuring them once (`iobench limits`)"


def say(text: str) -> None:
    """One message on stderr, printed as it is (paths may hold [brackets] that rich would read as markup)."""
    err.print(text, highlight=False, soft_wrap=True, markup=False)


class ConsoleEvents(Events):
    """The command line's events: messages on stderr, progress bars for the long steps (none with
    --quiet). Commands with a bar of their own subclass it for the events that move the bar."""

    def __init__(self, quiet: bool = False, limits_message: str = LIMITS_MESSAGE) -> None:
        self.quiet, self.limits_message = quiet, limits_message

    def say(self, text: str) -> None:
        say(text)

    def heading(self, text: str) -> None:
        if not self.quiet:
            say(text)

    def progress(self) -> AbstractContextManager[Reporter]:
        from iobench.progress import make_reporter

        return make_reporter(self.quiet, err)

    def measuring_limits(self) -> None:
        say(self.limits_message)
