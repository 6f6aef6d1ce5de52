"""Errors the CLI reports as one line instead of a traceback."""


class IobenchError(Exception):
    """Bad input or an unusable environment: the CLI prints it and exits with code 2."""

    exit_code = 2


class RunFailed(IobenchError):
    """A measurement that started but could not finish (a worker died, a file could not be read)."""

    exit_code = 1


MAX_REASON = 300  # characters of a library's message carried into a one-line error


def one_line(exc: BaseException) -> str:
    """An exception's message as one short line: a worker's whole traceback, or a message with
    newlines from a file's contents, must not become many lines of a one-line error."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def reason(exc: BaseException) -> str:
    """What went wrong, as one line, the cause first: an exception a DataLoader worker raised arrives as its
    whole traceback (torch puts "Caught X in DataLoader worker process N" first and the cause last), and a
    long context must not push the cause past the cut."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and any(line.startswith("Traceback") or line.startswith("Original Traceback") for line in lines):
        return one_line(RuntimeError(f"{lines[-1]} ({lines[0].rstrip('.')})"))
    return f"{type(exc).__name__}: {one_line(exc)}"


def exited(exc: SystemExit) -> str:
    """What a `sys.exit` said, as the words of a failure: "called sys.exit(0)"."""
    return f"called sys.exit({'' if exc.code is None else repr(exc.code)})"


class UserExit(Exception):
    """Code the run called (a user's dataset, step or factory; a library) raised SystemExit: a failure of the run,
    named in one line, never the silent end of iobench with that code (rc 0 and no record)."""

    def __init__(self, exc: SystemExit) -> None:
        super().__init__(exited(exc))
