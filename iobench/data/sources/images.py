"""A folder of images in class sub-folders (the ImageFolder layout): PNG/JPEG decoded with Pillow,
resized to cover --shape and centre-cropped (`iobench.formats.photos`), uint8 channels first; label = class index in
sorted order.
A link (class folder, sub-folder or image) is refused, never followed."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from iobench.data.sources.base import SourceKind
from iobench.errors import IobenchError
from iobench.formats.photos import DEFAULT_SHAPE, cover_crop, opened
from iobench.spec import LABEL_DTYPE, SourceInfo
from iobench.system.fsutil import open_regular
from iobench.system.image_folder import image_files


class Images:
    """Image files decoded, resized to cover (H, W) and centre-cropped, as uint8 (C, H, W) rows."""

    dtype = np.dtype(np.uint8)

    def __init__(self, files: list[tuple[Path, int]], shape: tuple[int, ...]) -> None:
        self.files, self.shape = files, (len(files), *shape)
        self.ndim = 4

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, _ = rows.indices(len(self))
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # Pillow decodes without the GIL
            return np.stack(list(pool.map(self._one, range(start, stop))))

    def _one(self, index: int) -> np.ndarray:
        path = self.files[index][0]
        with open(open_regular(path), "rb") as f, opened(f, str(path)) as image:
            return cover_crop(image, self.shape[1:], str(path))


class ImageFolderSource(SourceKind):
    name = "images"
    takes_shape = True

    def matches(self, path: Path) -> bool:
        return path.is_dir()

    def shape_of(self, path: Path, shape: tuple[int, ...] | None, text: str) -> tuple[int, ...]:
        """--shape, or the one size every image has (nothing is resized then), or for photos of several sizes the
        training size DEFAULT_SHAPE: the pre-decoded formats hold them resized and centre-cropped to it, and `files`
        keeps them as they are, each read decoded and cropped to it."""
        if shape is None:
            from iobench.data.image_shape import inferred_shape

            shape = inferred_shape([p for p, _ in image_files(path)], text) or DEFAULT_SHAPE
        if len(shape) != 3 or shape[0] not in (1, 3):
            raise IobenchError(f"--from {text}: --shape for images is C,H,W with C 1 or 3, got {shape}")
        return shape

    def shape_words(self, path: Path, shape: tuple[int, ...]) -> str:
        """`prepare --from photos` without --shape chose 3x224x224 and said only "500 samples of (3, 224, 224)"."""
        if tuple(shape) != DEFAULT_SHAPE:
            return ""  # every image has this size: nothing was chosen for the user
        return (
            f"the images differ in size: each is resized and centre-cropped to {shape[1]}x{shape[2]}, the usual "
            "training size (--shape C,H,W chooses another; the files format keeps them as they are, each read "
            "decoded and cropped to it)"
        )

    def footprint(self, path: Path, features: str, labels: str) -> tuple[int, float]:
        files = image_files(path)
        return sum(p.stat().st_size for p, _ in files), max(p.stat().st_mtime for p, _ in files)

    def open(self, info: SourceInfo, closing: list[Any]) -> tuple[Any, Any]:
        files = image_files(Path(info.path))
        return Images(files, info.image_shape), np.array([label for _, label in files], dtype=LABEL_DTYPE)
