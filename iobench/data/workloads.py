"""Workload presets (`prepare --workload`, each named by a `PresetName`; feed's MLPerf workloads are another thing,
`iobench.feed.workloads.Workload`): the shapes, dtypes and content of the data people train on; unet3d's, DLIO's files
of a size distribution (`iobench.data.dlio_records`)."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.choices import Choice
from iobench.data.dlio_records import UNET3D, Records
from iobench.spec import Content


class PresetName(Choice):
    TABULAR = "tabular"
    IMAGE = "image"
    SMALL_IMAGE = "small-image"
    TOKENS = "tokens"
    UNET3D = "unet3d"


@dataclass(frozen=True)
class Preset:
    shape: tuple[int, ...]
    dtype: str
    content: Content
    why: str
    records: Records | None = None  # each sample a file of a size drawn as DLIO draws it (--format files only)
    size: int | None = None  # the samples prepared unless --size is given (None: iobench's default)

    @property
    def files_options(self) -> dict[str, int]:
        """The files format's options that write this preset's size distribution; empty where it has none."""
        return self.records.files_options if self.records else {}


PRESETS: dict[PresetName, Preset] = {
    PresetName.TABULAR: Preset((128,), "float32", Content.RANDOM, "128 float32 features: 520-byte rows"),
    PresetName.IMAGE: Preset((3, 224, 224), "uint8", Content.PHOTO, "ImageNet-sized photos, 150 KB raw"),
    PresetName.SMALL_IMAGE: Preset((3, 32, 32), "uint8", Content.PHOTO, "CIFAR-sized photos, 3 KB raw"),
    PresetName.TOKENS: Preset((2048,), "int32", Content.TOKENS, "2048 token ids of a 50,257-word vocabulary"),
    PresetName.UNET3D: Preset(
        (UNET3D.handed_bytes,),
        "uint8",
        Content.RANDOM,
        "DLIO's unet3d: a file a sample, 147 MB mean (--format files), 2 MiB handed over; 28 samples",
        records=UNET3D,
        size=28,
    ),
}


def workload_of(shape: tuple[int, ...], dtype: str, content: Content) -> str:
    """The preset a spec matches, or 'custom' (unet3d's is its files' sizes, which a spec does not hold: custom)."""
    for name, p in PRESETS.items():
        if p.records is None and (p.shape, p.dtype, p.content) == (shape, dtype, content):
            return str(name)
    return "custom"
