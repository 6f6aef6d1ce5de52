"""An image folder in class sub-folders (the ImageFolder layout) listed without following links: the
`--from` source reads it, and `files --format-option files.encoding=source` copies its files (a format may list it, not
import the data layer)."""

from __future__ import annotations

import os
from pathlib import Path

from iobench.errors import IobenchError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def image_files(root: Path) -> list[tuple[Path, int]]:
    """(image, class index) of an ImageFolder, in sorted order."""
    # A class folder linked to /usr was crawled whole before links were refused.
    classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    per_class = [_images_in(folder, root) for folder in classes]
    empty = [folder.name for folder, found in zip(classes, per_class, strict=True) if not found]
    if empty and len(empty) < len(classes):  # torchvision refuses this too: every later label would shift by one
        raise IobenchError(f"--from {root}: class folder {empty[0]!r} holds no PNG or JPEG files")
    files = [(p, label) for label, found in enumerate(per_class) for p in found]
    if not files:
        raise IobenchError(f"--from {root}: no PNG or JPEG files in class sub-folders (the ImageFolder layout)")
    return files


def _images_in(folder: Path, root: Path) -> list[Path]:
    """Image files below a class folder; a linked folder or image is refused (os.walk lists linked
    sub-folders without entering them)."""
    linked = [folder] if folder.is_symlink() else []
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        images = [n for n in filenames if Path(n).suffix.lower() in IMAGE_SUFFIXES]
        linked += [here / n for n in dirnames + images if (here / n).is_symlink()]
        if linked:
            raise IobenchError(
                f"--from {root}: {linked[0].relative_to(root)} is a link; a source is read without links"
            )
        found += [here / n for n in images]
    return sorted(found)
