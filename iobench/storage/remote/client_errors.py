"""An object-storage client's errors in one line: obstore's run to a page of debug output."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def obstore_reason(exc: BaseException) -> str | None:
    """An obstore error (a refused key, a server gone, a missing object) as its first line; obstore's message
    goes on for a page of debug output. None for an exception that is not obstore's."""
    if type(exc).__module__.split(".")[0] != "obstore":
        return None
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


@contextlib.contextmanager
def worded(url: str) -> Iterator[None]:
    """obstore's errors (a refused key, a server gone) as one OSError line naming the object: the runner words
    OSError, and obstore's own message runs to a page of debug output."""
    try:
        yield
    except Exception as exc:  # obstore's exception classes vary by release
        said = obstore_reason(exc)
        if said is None:
            raise
        raise OSError(f"{url}: {said}") from None
