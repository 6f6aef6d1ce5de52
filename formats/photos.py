"""Photos as users keep them: JPEG and PNG files of any size, in class folders, decoded with Pillow. Prepare
resizes each to cover the dataset's (C, H, W) and crops its centre for the formats that store decoded pixels
(`cover_crop`); `files` with encoding `photos` keeps the files byte for byte and a read decodes the file and crops
it to (H, W) as a training job does (`random_resized_crop`, torchvision's RandomResizedCrop: an area of 8-100% of
the photo at an aspect of 3/4-4/3, resized bilinearly), or its centre, as prepare did, for `verify`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

# An image is decoded whole before it is resized: one of 13,000 x 13,000 pixels costs 0.5-1.3 GB per decoding
# thread. 64 megapixels admits every camera photo and 8K frame.
MAX_IMAGE_PIXELS = 64_000_000
PILLOW_FORMATS = ("JPEG", "PNG")  # what a photo may be: Pillow's other decoders are never reached
SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)  # torchvision's RandomResizedCrop defaults
DEFAULT_SHAPE = (3, 224, 224)  # the training size of a folder whose photos differ in size, when none is given


_QUIET: list[bool] = []


def _no_bomb_warning() -> None:
    """Pillow warns (DecompressionBombWarning, printed before iobench's line) between 89 M and 179 M pixels; iobench
    refuses anything above MAX_IMAGE_PIXELS (64 M) in its own line, so the warning says nothing more. Process-wide,
    once: `warnings.catch_warnings` is not safe in the threads that decode."""
    if not _QUIET:
        import warnings

        from PIL import Image

        warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
        _QUIET.append(True)


def opened(f: BinaryIO, name: str) -> Any:
    """The photo as a Pillow image, once its header (nothing decoded yet) declares at most MAX_IMAGE_PIXELS; one
    ValueError naming it otherwise."""
    from PIL import Image

    _no_bomb_warning()
    try:
        image = Image.open(f, formats=PILLOW_FORMATS)
    except Image.DecompressionBombError:  # above Pillow's own limit (179 M pixels): above iobench's too
        raise ValueError(
            f"{name}: more pixels than Pillow's limit, more than the {MAX_IMAGE_PIXELS:,} iobench decodes"
        ) from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ValueError(f"{name}: not a readable JPEG or PNG ({exc})") from None
    if image.width * image.height > MAX_IMAGE_PIXELS:
        image.close()
        raise ValueError(
            f"{name}: {image.width}x{image.height} pixels, more than the {MAX_IMAGE_PIXELS:,} iobench decodes"
        )
    return image


def _pixels(image: Any, box: tuple[float, float, float, float], shape: Sequence[int], name: str) -> np.ndarray:
    """The box of the photo resized to (H, W), in the dataset's channels, as (C, H, W) uint8."""
    from PIL import Image

    channels, height, width = shape
    try:
        converted = image.convert("RGB" if channels == 3 else "L")
        pixels = np.asarray(converted.resize((width, height), Image.BILINEAR, box=box))
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise ValueError(f"{name}: not a readable image ({exc})") from None
    return pixels[None] if channels == 1 else np.moveaxis(pixels, -1, 0)


def cover_crop(image: Any, shape: Sequence[int], name: str) -> np.ndarray:
    """Resized to cover (H, W), then its centre cropped: what prepare stores for the pre-decoded formats."""
    from PIL import Image

    channels, height, width = shape
    try:
        converted = image.convert("RGB" if channels == 3 else "L")
        scale = max(width / converted.width, height / converted.height)
        size = (max(width, round(converted.width * scale)), max(height, round(converted.height * scale)))
        resized = converted.resize(size, Image.BILINEAR)
        left, top = (size[0] - width) // 2, (size[1] - height) // 2
        pixels = np.asarray(resized.crop((left, top, left + width, top + height)))
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise ValueError(f"{name}: not a readable image ({exc})") from None
    return pixels[None] if channels == 1 else np.moveaxis(pixels, -1, 0)


def random_box(width: int, height: int, rng: np.random.Generator) -> tuple[float, float, float, float]:
    """torchvision's RandomResizedCrop box: ten tries at a random area and aspect, else the centre at the nearest
    aspect allowed."""
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(*SCALE)
        aspect = math.exp(rng.uniform(math.log(RATIO[0]), math.log(RATIO[1])))
        w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            left, top = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
            return left, top, left + w, top + h
    ratio = width / height
    w, h = (width, round(width / RATIO[0])) if ratio < RATIO[0] else (round(height * RATIO[1]), height)
    w, h = min(w, width), min(h, height)
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


def random_resized_crop(image: Any, shape: Sequence[int], rng: np.random.Generator, name: str) -> np.ndarray:
    return _pixels(image, random_box(image.width, image.height, rng), shape, name)


def decode(f: BinaryIO, shape: Sequence[int], crop: str, rng: np.random.Generator, name: str) -> np.ndarray:
    """A kept photo's sample: decoded, and cropped to the dataset's shape (`random`, or `centre` as prepare did)."""
    with opened(f, name) as image:
        if crop == "centre":
            return cover_crop(image, shape, name)
        return random_resized_crop(image, shape, rng, name)


def _size(path: Path) -> tuple[int, int]:
    from iobench.system.fsutil import open_regular

    with open(open_regular(path), "rb") as f, opened(f, str(path)) as image:
        return image.height, image.width


def all_sized(files: Sequence[Path], height: int, width: int) -> bool:
    """Whether every photo is (H, W) already, by its header (nothing decoded)."""
    with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        return all(size == (height, width) for size in pool.map(_size, files))
