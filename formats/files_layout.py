"""files' layout: where sample i lives, its options, how one sample file is decoded and checked against the spec, and
which source images a kept folder holds. Shared by the writer, the local and object readers and the decoder after
the copy (`loaders/decode.py`), none of which it imports."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import Image

from iobench.errors import IobenchError
from iobench.formats import photos
from iobench.formats.base import DERIVED, READ_ANY_LOADER
from iobench.formats.npy import read_header
from iobench.spec import DatasetSpec
from iobench.system.fsutil import open_regular
from iobench.system.image_folder import image_files

LABELS = "labels.npy"
PER_FOLDER = 1000
MAX_ENCODED_BYTES = 256 * 2**20  # a sample file handed over encoded is read whole up to this (a 64 MP JPEG is ~30 MB)
PNG_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


ENCODINGS = ("auto", "png", "npy", "source", "photos")
CROPS = ("random", "centre")
SOURCE_SUFFIXES = {".png": "png", ".jpg": "jpg", ".jpeg": "jpg"}  # what a kept source file is named
PILLOW_FORMATS = {"png": ["PNG"], "jpg": ["JPEG"]}


@dataclass(frozen=True)
class FilesOptions:
    # png for image-shaped uint8 samples, npy otherwise; source: the files kept, each already the sample; photos:
    # the files kept as they are (JPEG and PNG of any size), each read decoded and cropped to the sample's shape
    encoding: str = "auto"
    suffix: str = field(default="", metadata=DERIVED)  # source: png or jpg, what the folder holds (resolved)
    # photos: how a read crops a photo to the sample's shape (random: torchvision's RandomResizedCrop; centre: as
    # prepare cropped it for the pre-decoded formats, what verify reads)
    crop: str = field(default="random", metadata=READ_ANY_LOADER)

    def __post_init__(self) -> None:
        if self.encoding not in ENCODINGS:
            raise IobenchError(f"files encoding must be {', '.join(ENCODINGS[:-1])} or photos, got {self.encoding!r}")
        if self.suffix not in ("", *PILLOW_FORMATS) or (self.suffix and self.encoding != "source"):
            raise IobenchError(f"files: a kept source file (encoding source) is png or jpg, got {self.suffix!r}")
        if self.crop not in CROPS:
            raise IobenchError(f"files crop must be random or centre, got {self.crop!r}")

    @property
    def file_suffix(self) -> str:
        if self.encoding == "photos":
            return "img"  # JPEG or PNG, as the photo was: Pillow tells them apart by their bytes
        return self.suffix if self.encoding == "source" else self.encoding


def png_axes(shape: tuple[int, ...]) -> str | None:
    """How an image shape maps to PNG's (H, W, C): 'hw', 'chw', 'hwc'; None if it is not an image."""
    if len(shape) == 2:
        return "hw"
    if len(shape) == 3 and shape[0] in PNG_MODES:
        return "chw"
    if len(shape) == 3 and shape[2] in PNG_MODES:
        return "hwc"
    return None


def sample_path(index: int, spec: DatasetSpec, suffix: str) -> str:
    """Where sample `index` lives, relative to the format folder: samples/<folder>/<index>.<suffix>."""
    width = len(str(spec.n_samples - 1))
    folders = len(str((spec.n_samples - 1) // PER_FOLDER))
    return f"samples/{index // PER_FOLDER:0{folders}d}/{index:0{width}d}.{suffix}"


def decode_image(data: io.BufferedReader, spec: DatasetSpec, axes: str, name: str, suffix: str = "") -> np.ndarray:
    """Decode one sample; the header is checked against the spec before any pixel is decompressed
    (a 1 KB PNG can declare gigapixels). A kept source file (`suffix` png or jpg) is converted to the
    spec's channels as the image folder source converted it; iobench's own PNGs must match exactly."""
    height, width = spec.shape[1:] if axes == "chw" else spec.shape[:2]
    channels = 1 if axes == "hw" else (spec.shape[0] if axes == "chw" else spec.shape[2])
    mode = PNG_MODES[channels]
    try:
        with Image.open(data, formats=PILLOW_FORMATS[suffix or "png"]) as image:
            if image.size != (width, height) or (image.mode != mode and not suffix):
                raise ValueError(f"{name}: a {image.mode} image of {image.size}; the spec says {spec.shape} uint8")
            pixels = np.asarray(image if image.mode == mode else image.convert(mode))
    except (OSError, SyntaxError, Image.DecompressionBombError) as exc:  # Pillow's verdicts on the bytes
        raise ValueError(f"{name}: not a readable {(suffix or 'png').upper()} ({exc})") from None
    if axes == "chw":
        return np.moveaxis(pixels.reshape(height, width, channels), -1, 0)
    return pixels.reshape(spec.shape)


KEPT_AS_IS = (
    "source keeps every file as it is, so every image must already have the dataset's shape (photos keeps "
    "images of any size and crops them at each read; png re-encodes them)"
)


def source_images(spec: DatasetSpec) -> list[Path]:
    """The image files of the --from folder, in the order its samples were read."""
    if spec.source is None or spec.source.kind != "images":
        raise IobenchError(
            "files: --format-option files.encoding=source keeps the files of --from an image folder; "
            "this dataset has none"
        )
    files = [p for p, _ in image_files(Path(spec.source.path))]
    if len(files) != spec.n_samples:
        raise IobenchError(f"--from {spec.source.path}: {len(files):,} images now, {spec.n_samples:,} when prepared")
    return files


def decode_sample(
    f: BinaryIO, spec: DatasetSpec, options: FilesOptions, relative: str, rng: np.random.Generator | None = None
) -> np.ndarray:
    """One sample file's features: its image or .npy header checked against the spec before its data is read; a
    kept photo decoded and cropped to the spec's shape (`rng` draws a random crop)."""
    if options.encoding == "photos":
        return photos.decode(f, spec.shape, options.crop, rng or np.random.default_rng(), relative)
    if options.file_suffix != "npy":  # options.suffix is set only for a kept source file (FilesOptions checks it)
        return decode_image(f, spec, png_axes(spec.shape) or "", relative, options.suffix)
    shape, fortran, dtype = read_header(f)
    if tuple(shape) != spec.shape or dtype != spec.np_dtype or fortran:
        raise ValueError(f"{relative} declares {dtype} {tuple(shape)}; the spec says {spec.dtype} {spec.shape}")
    data = np.frombuffer(f.read(spec.feature_bytes + 1), dtype=spec.np_dtype)
    if data.size != spec.features_per_sample:
        raise ValueError(f"{relative}: {data.nbytes} bytes of data; the spec says {spec.feature_bytes}")
    return data.reshape(spec.shape)


def photos_of_other_sizes(spec: DatasetSpec) -> bool:
    """An image folder whose photos are not all the sample's size: `files` keeps them as they are (photos)."""
    if spec.source is None or spec.source.kind != "images" or len(spec.shape) != 3:
        return False
    return not photos.all_sized(source_images(spec), spec.shape[1], spec.shape[2])


def kept_suffix(spec: DatasetSpec) -> str:
    """png or jpg: the one kind of image a kept folder may hold (the reader names a sample by its index).
    The first image's size is checked here, before anything is written; the writer checks every one."""
    files = source_images(spec)
    kinds = {SOURCE_SUFFIXES[p.suffix.lower()] for p in files}
    if len(kinds) > 1:
        raise IobenchError(
            "--format-option files.encoding=source: the folder mixes PNG and JPEG files; keep one kind, "
            "or re-encode with png"
        )
    with open(open_regular(files[0]), "rb") as f, photos.opened(f, str(files[0])) as image:
        if (image.height, image.width) != spec.shape[1:]:
            raise IobenchError(
                f"--format-option files.encoding=source: {files[0]} is {image.width}x{image.height}, the dataset "
                f"{spec.shape[2]}x{spec.shape[1]}; {KEPT_AS_IS}"
            )
    return kinds.pop()
