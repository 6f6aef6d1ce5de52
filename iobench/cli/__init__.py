"""The `iobench` command line: parses, calls, prints. No logic a test would want to call.

One module per phase of commands; each imports what its command needs when the command runs, so that
`iobench --help` and a mistyped option answer without loading torch (scripts/bench_startup.py).
"""

# The order of these imports is the order of the commands in `iobench --help`: data, measuring, results, machine.
from iobench.cli.app import app, main  # noqa: I001
from iobench.cli import data, run, sweep, reports, machine, tune, serve, checkpoint, feed  # noqa: F401 - they register the commands

__all__ = ["app", "main"]
