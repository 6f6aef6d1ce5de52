"""What a kind of `--from` source provides: how it is recognised, which keys name its features and
labels, what it occupies on disk, and its two arrays opened for reading in order.

The arrays a kind opens answer `len()`, `.shape`, `.ndim`, `.dtype` and ascending row slices
(`features[lo:hi]`); the writers read them front to back. A kind opens nothing writable and follows no
link (the module docstring of iobench/data/sources says why).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from iobench.errors import IobenchError
from iobench.spec import SourceInfo


class SourceKind(ABC):
    name: ClassVar[str]
    suffixes: ClassVar[tuple[str, ...]] = ()  # a file source is recognised by its suffix
    takes_labels_file: ClassVar[bool] = False  # `--labels FILE` (or FILE:NAME); others use --labels-key
    takes_shape: ClassVar[bool] = False  # `--shape` (images are resized to it); arrays keep their own

    def matches(self, path: Path) -> bool:
        return not path.is_dir() and path.suffix.lower() in self.suffixes

    def keys(
        self, path: Path, inner: str, features_key: str | None, labels_key: str | None, text: str
    ) -> tuple[str, str]:
        """The features' and labels' names inside the source ('' where it has none)."""
        return "", ""

    def footprint(self, path: Path, features: str, labels: str) -> tuple[int, float]:
        """Bytes and newest modification time: a prepared dataset notices a changed source by them."""
        st = path.stat()
        return st.st_size, st.st_mtime

    def shape_of(self, path: Path, shape: tuple[int, ...] | None, text: str) -> tuple[int, ...] | None:
        """The sample shape the source is read at, when the kind decides it (images)."""
        if shape is not None:
            raise IobenchError(f"--from {text}: --shape applies to image folders; an array keeps its own shape")
        return None

    def shape_words(self, path: Path, shape: tuple[int, ...]) -> str:
        """How `shape_of` chose the shape when none was given, in a sentence (the kinds that choose one say)."""
        return ""

    @abstractmethod
    def open(self, info: SourceInfo, closing: list[Any]) -> tuple[Any, Any]:
        """(features, labels or None); whatever must be closed afterwards is appended to `closing`."""
