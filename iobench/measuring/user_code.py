"""The user's own code named on the command line (`--step module:function`, `--dataset-factory module:function`),
imported as `python -m` would import it: the working directory first. It is the user's code by intent; every
refusal is one line naming it."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from iobench.errors import IobenchError, exited, one_line


def is_reference(text: str) -> bool:
    """`pkg.module:function`: a module path, a colon, an identifier."""
    module, sep, attribute = text.partition(":")
    return bool(sep) and attribute.isidentifier() and all(part.isidentifier() for part in module.split("."))


def load_callable(text: str, option: str) -> Callable[..., Any]:
    """The function `text` names (`pkg.module:function`); one line for what cannot be imported or called."""
    module_name, _, attribute = text.partition(":")
    if not is_reference(text):
        raise IobenchError(f"{option} takes module:function (e.g. mypkg.train:step), got {text!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise IobenchError(f"{option} {text}: cannot import {module_name} ({one_line(exc)})") from None
    except SystemExit as exc:  # the user's module ending the process as it loads: a failure, named
        raise IobenchError(f"{option} {text}: importing {module_name} {exited(exc)}") from None
    except Exception as exc:  # the user's module failed while it loaded: its reason in one line
        raise IobenchError(
            f"{option} {text}: importing {module_name} failed: {type(exc).__name__}: {one_line(exc)}"
        ) from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise IobenchError(f"{option} {text}: {module_name} has no function {attribute}")
    return function
