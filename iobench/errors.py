"""Errors the CLI reports as one line instead of a traceback."""


class IobenchError(Exception):
    """Bad input or an unusable environment: the CLI prints it and exits with code 2."""

    exit_code = 2


class RunFailed(IobenchError):
    """A measurement that started but could not finish (a worker died, a file could not be read)."""

    exit_code = 1
