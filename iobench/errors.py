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
