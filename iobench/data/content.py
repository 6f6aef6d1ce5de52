"""What generated samples contain. Random bytes for tabular features; for images, something a
compressor treats like a photo (smooth regions, hard edges, a little sensor noise); for tokens,
ids from a vocabulary. A compressor on random bytes measures nothing, so PNG and lz4 figures are
only meaningful on content with a photo's structure.
"""

from __future__ import annotations

import numpy as np

from iobench.spec import VOCABULARY, Content, image_layout

PHOTO_NOISE = 3.0  # std of the added noise, in 0..255 levels: sets how well PNG compresses
PHOTO_SHAPES = 4  # flat-coloured ellipses per image: the edges
_PHOTO_BATCH_VALUES = 2**22  # pixel values generated at once (bounds the float32 work arrays)


def features(content: Content, rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An array of `shape` (samples first) holding this content."""
    if content is Content.PHOTO:
        return _photos(rng, shape)
    if content is Content.TOKENS:
        return rng.integers(0, VOCABULARY, size=shape, dtype=dtype)
    return _random(rng, shape, dtype)


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "f":
        # Uniform floats in [-1, 1): cheap to generate and incompressible, like real features.
        gen = np.float64 if dtype.itemsize == 8 else np.float32
        out = rng.random(shape, dtype=gen)
        out *= 2
        out -= 1
        return out.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def _photos(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    n = shape[0]
    channels, height, width = image_layout(shape[1:])  # type: ignore[misc]
    out = np.empty((n, channels, height, width), dtype=np.uint8)
    step = max(1, _PHOTO_BATCH_VALUES // (channels * height * width))
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        out[lo:hi] = _photo_batch(rng, hi - lo, channels, height, width)
    return out.reshape(shape)


def _photo_batch(rng: np.random.Generator, n: int, channels: int, height: int, width: int) -> np.ndarray:
    # Smooth regions: a coarse random grid of colours, bilinearly upsampled.
    grid = 4
    coarse = rng.random((n, channels, grid, grid), dtype=np.float32) * 255
    kernel = np.einsum("hg,wk->gkhw", _interpolation(height, grid), _interpolation(width, grid))
    img = (coarse.reshape(n * channels, grid * grid) @ kernel.reshape(grid * grid, -1)).reshape(
        n, channels, height, width
    )
    # Edges: flat-coloured ellipses in front of it.
    yy = np.arange(height, dtype=np.float32)[None, :, None]
    xx = np.arange(width, dtype=np.float32)[None, None, :]
    for _ in range(PHOTO_SHAPES):
        cy, cx = rng.random(n, dtype=np.float32) * height, rng.random(n, dtype=np.float32) * width
        ry = (0.08 + 0.3 * rng.random(n, dtype=np.float32)) * height
        rx = (0.08 + 0.3 * rng.random(n, dtype=np.float32)) * width
        inside = ((yy - cy[:, None, None]) / ry[:, None, None]) ** 2 + (
            (xx - cx[:, None, None]) / rx[:, None, None]
        ) ** 2
        colour = rng.random((n, channels, 1, 1), dtype=np.float32) * 255
        np.copyto(img, colour, where=inside[:, None] < 1)
    # Sensor noise: windows of one random table at random offsets (drawing fresh normals per pixel
    # took most of the time; a compressor never sees two images at once).
    size = channels * height * width
    table = rng.standard_normal(size + 2**16, dtype=np.float32) * PHOTO_NOISE
    flat = img.reshape(n, size)
    for i, offset in enumerate(rng.integers(0, 2**16, size=n)):
        flat[i] += table[offset : offset + size]
    return np.clip(img, 0, 255, out=img).round().astype(np.uint8)


def _interpolation(size: int, grid: int) -> np.ndarray:
    """A (size, grid) matrix that linearly interpolates grid points spread over size pixels."""
    position = np.linspace(0, grid - 1, size, dtype=np.float32)
    low = np.clip(np.floor(position).astype(int), 0, grid - 2)
    frac = position - low
    m = np.zeros((size, grid), dtype=np.float32)
    m[np.arange(size), low] = 1 - frac
    m[np.arange(size), low + 1] = frac
    return m
