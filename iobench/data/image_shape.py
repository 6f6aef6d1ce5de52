"""The --shape of an image folder whose images all have one size: read from their headers, none decoded."""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from iobench.errors import IobenchError
from iobench.system.fsutil import open_regular

GREY = {"1", "L", "LA", "I", "I;16", "F"}  # Pillow modes that iobench stores as one channel


def _header(path: Path) -> tuple[int, int, int]:
    from PIL import Image, UnidentifiedImageError

    try:
        with open(open_regular(path), "rb") as f, Image.open(f) as image:
            return (1 if image.mode in GREY else 3), image.height, image.width
    except (OSError, SyntaxError, ValueError, UnidentifiedImageError) as exc:
        raise IobenchError(f"{path}: not a readable image ({exc})") from None


def inferred_shape(files: list[Path], source: str) -> tuple[int, int, int]:
    """(C, H, W) shared by every image; one line naming the sizes found when they differ."""
    with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        shapes = Counter(pool.map(_header, files))
    if len(shapes) == 1:
        return next(iter(shapes))
    common = ", ".join(f"{c},{h},{w} ({n:,} images)" for (c, h, w), n in shapes.most_common(3))
    raise IobenchError(
        f"--from {source}: the images have {len(shapes)} shapes (C,H,W: {common}); give --shape C,H,W to resize "
        "and crop them to one"
    )
