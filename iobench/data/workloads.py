"""Workload presets: the shapes, dtypes and content of the data people train on."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.choices import Choice
from iobench.spec import Content


class Workload(Choice):
    TABULAR = "tabular"
    IMAGE = "image"
    SMALL_IMAGE = "small-image"
    TOKENS = "tokens"


@dataclass(frozen=True)
class Preset:
    shape: tuple[int, ...]
    dtype: str
    content: Content
    why: str


PRESETS: dict[Workload, Preset] = {
    Workload.TABULAR: Preset((128,), "float32", Content.RANDOM, "128 float32 features: 520-byte rows"),
    Workload.IMAGE: Preset((3, 224, 224), "uint8", Content.PHOTO, "ImageNet-sized photos, 150 KB raw"),
    Workload.SMALL_IMAGE: Preset((3, 32, 32), "uint8", Content.PHOTO, "CIFAR-sized photos, 3 KB raw"),
    Workload.TOKENS: Preset((2048,), "int32", Content.TOKENS, "2048 token ids of a 50,257-word vocabulary"),
}


def workload_of(shape: tuple[int, ...], dtype: str, content: Content) -> str:
    """The preset a spec matches, or 'custom'."""
    for name, p in PRESETS.items():
        if (p.shape, p.dtype, p.content) == (shape, dtype, content):
            return str(name)
    return "custom"
