"""The --shape of an image folder whose images all have one size: read from their headers, none decoded (photos of
several sizes get the training size instead: `iobench.formats.photos.DEFAULT_SHAPE`)."""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from iobench.errors import IobenchError
from iobench.system.fsutil import open_regular

GREY = {"1", "L", "LA", "I", "I;16", "F"}  # Pillow modes that iobench stores as one channel


def _header(path: Path) -> tuple[int, int, int]:
    """Its (C, H, W) from the header, once it declares no more pixels than iobench decodes (`photos.opened`)."""
    from iobench.formats.photos import opened

    try:
        with open(open_regular(path), "rb") as f, opened(f, str(path)) as image:
            return (1 if image.mode in GREY else 3), image.height, image.width
    except OSError as exc:
        raise IobenchError(f"{path}: not a readable image ({exc})") from None
    except ValueError as exc:
        raise IobenchError(str(exc)) from None


def inferred_shape(files: list[Path], source: str) -> tuple[int, int, int] | None:
    """(C, H, W) shared by every image; None when they differ (photos as people keep them)."""
    with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        shapes = Counter(pool.map(_header, files))
    return next(iter(shapes)) if len(shapes) == 1 else None
