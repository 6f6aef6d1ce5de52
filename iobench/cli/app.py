"""The Typer app and the entry point: every expected failure becomes one line on stderr and exit code 2,
an interrupt one line and exit code 128 + its signal (130 for Ctrl-C, 143 for SIGTERM). The commands register
themselves from their own modules."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Annotated

import typer

from iobench import __version__
from iobench.cli.console import out, say
from iobench.errors import IobenchError
from iobench.system.signals import ENDING, exit_when_stuck, quiet_interrupted_handover, redeliver_lost_interrupt
from iobench.torchrun_env import launched_by_torchrun


def _flags_take_no_value() -> None:
    """typer 0.29's help shows `<bool>` beside every flag (`--help <bool>`, `--quiet <bool>`), as if it took a value:
    a flag takes none, so its type column stays empty."""
    from typer import core

    option = getattr(core, "TyperOption", None)
    shown = getattr(option, "display_type_rich", None)
    if shown is None or getattr(shown, "flags_plain", False):
        return

    def display_type_rich(self: object, ctx: object) -> str | None:
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    display_type_rich.flags_plain = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich  # type: ignore[union-attr]


_flags_take_no_value()

app = typer.Typer(
    name="iobench",
    help="How fast does training data travel from storage to the device in PyTorch? "
    "Prepare one dataset in up to eleven formats (npy, HDF5, LMDB, TensorDict memmap, one file per sample, "
    "WebDataset, Arrow, Zarr, TFRecord, LitData, Lance), verify it, then time loading it through each loader.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        out.print(f"iobench {__version__}")
        raise typer.Exit(0)
    command = ctx.invoked_subcommand
    if command is not None and command != "run" and launched_by_torchrun():
        raise IobenchError(f"`iobench {command}` does not run under torchrun (every rank would do all of it); only run")


# typer raises click's exceptions, or since typer 0.20 those of its own vendored copy of click.
_CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


# The parser's validation library speaks its own words; a user typed a number.
_PLAIN = (
    ("Input should be a valid integer, unable to parse string as an integer", "expected a whole number"),
    ("Input should be a valid integer", "expected a whole number"),
    ("Input should be a valid number, unable to parse string as a number", "expected a number"),
    ("Input should be a valid number", "expected a number"),
    ("Input should be a valid boolean", "expected true or false"),
)


def plain_words(message: str) -> str:
    for library, plain in _PLAIN:
        message = message.replace(library, plain)
    return message


def _terminate(signum: int, _frame: object) -> None:
    # typer swallows KeyboardInterrupt into a bare exit code; remember why we stop to say so.
    ENDING.set(signum)
    raise KeyboardInterrupt(f"signal {signum}")


def _interrupted_code() -> int:
    """128 + the signal that stopped the command (130 for Ctrl-C, 143 for SIGTERM), as a shell reports it."""
    return 128 + (ENDING.signum or signal.SIGINT)


def _rank_tag() -> str:
    """Under torchrun each rank reports its own errors: say which one speaks."""
    return f"rank {os.environ['RANK']}: " if launched_by_torchrun() else ""


_INTERRUPTED = "iobench: interrupted; nothing half-written was kept"


def _interrupted() -> None:
    say(_INTERRUPTED)


def _ending(message: str, *, in_process: bool) -> None:
    """The last line of a failed or interrupted command. A DataLoader worker that dies now (the
    command is ending anyway) must not have torch's SIGCHLD handler raise its news inside the print."""
    torch_handler = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    say(message)
    if in_process and torch_handler is not None:  # later loaders in the caller's process rely on it
        signal.signal(signal.SIGCHLD, torch_handler)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every expected failure becomes one line on stderr and exit code 2."""
    if argv is None:  # a rank of `--nproc` ends with the iobench that started it
        from iobench.system.ranks import tie_to_parent

        tie_to_parent()
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    hook, unraisable = sys.excepthook, sys.unraisablehook
    sys.excepthook = quiet_interrupted_handover(hook)
    sys.unraisablehook = redeliver_lost_interrupt(unraisable, ENDING.is_set)
    signal.signal(signal.SIGTERM, _terminate)
    if previous[signal.SIGINT] is signal.default_int_handler:
        signal.signal(signal.SIGINT, _terminate)
    if argv is None:  # the command's own process (not a test calling it in-process)
        exit_when_stuck()
    try:
        _main(argv)
    except SystemExit as exc:
        if argv is None and exc.code in (130, 143):
            _exit_now(exc.code)
        raise
    finally:
        if argv is None:
            # The process ends now and everything is written: a late Ctrl-C has nothing left to stop,
            # and raised inside the interpreter's exit callbacks it would only print a traceback.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        else:  # called in-process (tests): the caller gets its handlers back, and a later command is not ending
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            sys.excepthook, sys.unraisablehook = hook, unraisable
            ENDING.clear()


def _exit_now(code: int) -> None:
    """An interrupted command, its records written and its line said: the exit handlers run now (servers, Ray and its
    guard, folders), then the process ends without the interpreter's teardown of every module (torch's and Ray's took
    0.7 s after Ray had shut down), so Ctrl-C ends a run within 2 s whatever loader ran."""
    import atexit

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the handlers short
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _main(argv: list[str] | None) -> None:
    command = typer.main.get_command(app)
    try:
        rc = command.main(args=argv, prog_name="iobench", standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except _CLICK_ERROR as exc:
        say(f"iobench: error: {plain_words(exc.format_message())}")
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        _ending(_INTERRUPTED, in_process=argv is not None)
        sys.exit(_interrupted_code())
    except Exception as exc:
        if ENDING.is_set():  # a library turned the interruption into a failure of its own: it is the interruption
            _ending(_INTERRUPTED, in_process=argv is not None)
            sys.exit(_interrupted_code())
        if not isinstance(exc, IobenchError):
            raise
        _ending(f"iobench: error: {_rank_tag()}{exc}", in_process=argv is not None)
        sys.exit(exc.exit_code)
    if ENDING.is_set() or rc == 130:  # typer returns 130 for a KeyboardInterrupt it caught, saying nothing
        _interrupted()
        sys.exit(_interrupted_code())
    sys.exit(rc if isinstance(rc, int) else 0)
