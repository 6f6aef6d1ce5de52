"""files' layout: where sample i lives, its options, how one sample file is decoded and checked against the spec, and
which source images a kept folder holds. Shared by the writer, the local and object readers and the decoder after
the copy (`loaders/decode.py`), none of which it imports."""

from __future__ import annotations

import io
import math
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
MAX_FILE_BYTES = 2**32  # a sample file of a size distribution (files.file_bytes): DLIO's largest unet3d is 0.4 GB
MAX_SIZED_SAMPLES = 1_000_000  # a size distribution's samples: their sizes are drawn in memory (16 bytes each)
FILLER_PIECE = 8 * 2**20  # filler is written and read in pieces of this much, never a whole file in memory
MAX_ENCODED_BYTES = 256 * 2**20  # a sample file handed over encoded is read whole up to this (a 64 MP JPEG is ~30 MB)
PNG_MODES = {1: "L", 3: "RGB", 4: "RGBA"}
SIZES_STREAM, FILLER_STREAM = 0x73697A65, 0x66696C6C  # the seed's streams of the files' sizes and their filler


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
    # DLIO's record_length and record_length_stdev (its npz workloads, unet3d's): each sample's file holds the sample
    # (.npy) followed by filler to a size drawn as DLIO draws it (`file_sizes`), read whole at every access while the
    # sample is what is handed over (DLIO's record_length_resize); 0: every file holds the sample alone
    file_bytes: int = 0
    file_bytes_stdev: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.file_bytes <= MAX_FILE_BYTES or not 0 <= self.file_bytes_stdev <= MAX_FILE_BYTES:
            raise IobenchError(f"files: file_bytes and file_bytes_stdev must be 0..{MAX_FILE_BYTES:,}")
        if self.file_bytes_stdev and not self.file_bytes:
            raise IobenchError("files: file_bytes_stdev needs file_bytes (the files' mean size)")
        if self.file_bytes and self.encoding not in ("auto", "npy"):
            raise IobenchError(f"files: file_bytes pads .npy samples (encoding npy), not {self.encoding}")
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


def file_sizes(spec: DatasetSpec, options: FilesOptions) -> np.ndarray | None:
    """Each sample file's bytes where files.file_bytes is set, drawn as DLIO draws a record's (`DataGenerator.
    get_dimension`: two sides from a normal of mean sqrt(file_bytes) and stdev file_bytes_stdev / 2 / sqrt(
    file_bytes), each at least 1, their product), from the spec's seed; never less than the sample's own .npy. None:
    each file is its sample."""
    if not options.file_bytes:
        return None
    if spec.n_samples > MAX_SIZED_SAMPLES:
        raise IobenchError(
            f"files: file_bytes holds at most {MAX_SIZED_SAMPLES:,} samples' sizes, not {spec.n_samples:,}"
        )
    side = math.sqrt(options.file_bytes)
    rng = np.random.default_rng([spec.seed, SIZES_STREAM])
    sides = np.maximum(rng.normal(int(side), options.file_bytes_stdev / 2 / side, (spec.n_samples, 2)), 1)
    sizes = sides.astype(np.int64).prod(axis=1)
    return np.clip(sizes, npy_file_bytes(spec), MAX_FILE_BYTES)


def npy_file_bytes(spec: DatasetSpec) -> int:
    """Bytes of one sample's .npy file as the writer writes it (`np.lib.format.write_array`: a 1.0 header)."""
    header = io.BytesIO()
    fields = {"descr": np.lib.format.dtype_to_descr(spec.np_dtype), "fortran_order": False, "shape": spec.shape}
    np.lib.format.write_array_header_1_0(header, fields)
    return len(header.getvalue()) + spec.feature_bytes


def read_filler(f: BinaryIO, expected: int, relative: str) -> None:
    """The rest of a sample file of a size distribution read, as a training job reading the whole file does (in
    pieces: the filler is not kept); refused where the file is not the size drawn for it."""
    rest = expected - f.tell()
    piece = bytearray(min(max(rest, 0), FILLER_PIECE) + 1)
    while rest > 0:
        got = f.readinto(memoryview(piece)[: min(rest, FILLER_PIECE)])
        if not got:
            raise ValueError(f"{relative}: ends {rest:,} bytes short of the {expected:,} drawn for it")
        rest -= got
    if f.readinto(memoryview(piece)[:1]):
        raise ValueError(f"{relative}: longer than the {expected:,} bytes drawn for it")


def decode_sample(
    f: BinaryIO,
    spec: DatasetSpec,
    options: FilesOptions,
    relative: str,
    rng: np.random.Generator | None = None,
    file_bytes: int = 0,
) -> np.ndarray:
    """One sample file's features: its image or .npy header checked against the spec before its data is read; a
    kept photo decoded and cropped to the spec's shape (`rng` draws a random crop); a file of a size distribution
    (`file_bytes`, its size) read to its end."""
    if options.encoding == "photos":
        return photos.decode(f, spec.shape, options.crop, rng or np.random.default_rng(), relative)
    if options.file_suffix != "npy":  # options.suffix is set only for a kept source file (FilesOptions checks it)
        return decode_image(f, spec, png_axes(spec.shape) or "", relative, options.suffix)
    shape, fortran, dtype = read_header(f)
    if tuple(shape) != spec.shape or dtype != spec.np_dtype or fortran:
        raise ValueError(f"{relative} declares {dtype} {tuple(shape)}; the spec says {spec.dtype} {spec.shape}")
    data = np.frombuffer(f.read(spec.feature_bytes + (0 if file_bytes else 1)), dtype=spec.np_dtype)
    if data.size != spec.features_per_sample:
        raise ValueError(f"{relative}: {data.nbytes} bytes of data; the spec says {spec.feature_bytes}")
    if file_bytes:
        read_filler(f, file_bytes, relative)
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
