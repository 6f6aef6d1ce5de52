"""Errors the CLI reports as one line instead of a traceback."""


class IobenchError(Exception):
    """Bad input or an unusable environment: the CLI prints it and exits with code 2."""

    exit_code = 2
