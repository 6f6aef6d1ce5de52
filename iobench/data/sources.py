"""`prepare --from`: the user's own data as the shared dataset, read in chunks (never whole).

A source is opened and checked completely (readable, a supported dtype, one shape, labels of the
same length, integer labels >= 0) before anything is written; afterwards it is read front to back,
chunk by chunk, by every format writer that needs it. A source is data: never opened writable, read
with pickle refused, and never a way to read another file (links inside a TensorDict folder or an
image folder, HDF5 external storage, external links and virtual datasets are refused).

- `X.npy` (plain reads: a mapping would count every page read in RSS), labels `--labels Y.npy`;
- `D.npz --features-key x --labels-key y` (streamed out of the archive: stored or deflated);
- `F.h5:features`, labels `--labels F.h5:labels`;
- a TensorDict memmap folder with a features and a labels entry: its meta.json is read as JSON and
  the `.memmap` files with plain reads (tensordict would map them writable and grow a short one);
- a folder of images in class sub-folders (ImageFolder): PNG/JPEG decoded with Pillow, resized to
  cover --shape and centre-cropped, uint8 channels first; label = class index in sorted order.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from iobench.errors import IobenchError, one_line
from iobench.formats.npy import read_header
from iobench.spec import LABEL_DTYPE, SUPPORTED_DTYPES, SourceInfo
from iobench.system.fsutil import check_regular, open_regular, pread_full

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
# An image is decoded whole before it is resized: one of 13,000 x 13,000 pixels costs 0.5-1.3 GB per
# decoding thread. 64 megapixels admits every camera photo and 8K frame.
MAX_IMAGE_PIXELS = 64_000_000
META_JSON_BYTES = 2**20  # a TensorDict's meta.json describes a few entries: a larger one is refused


@dataclass
class Opened:
    """A source, checked: its size, shape, dtype and number of classes, and a way to read it in order."""

    info: SourceInfo
    n_samples: int
    shape: tuple[int, ...]
    dtype: str
    n_classes: int


def open_source(
    text: str,
    labels: str | None = None,
    features_key: str | None = None,
    labels_key: str | None = None,
    shape: tuple[int, ...] | None = None,
) -> Opened:
    """Check a source completely; one line naming it when it cannot be used."""
    path_text, _, inner = text.partition(":") if not Path(text).exists() else (text, "", "")
    path = Path(path_text).expanduser().resolve()
    if not path.exists():
        raise IobenchError(f"--from {text}: no such file or folder")
    if not os.access(path, os.R_OK):
        raise IobenchError(f"--from {text}: not readable")
    if path.is_dir():
        kind = "tensordict" if (path / "meta.json").is_file() else "images"
    else:
        kind = {".npy": "npy", ".npz": "npz", ".h5": "hdf5", ".hdf5": "hdf5"}.get(path.suffix.lower(), "")
        if not kind:
            raise IobenchError(
                f"--from {text}: unsupported source; give .npy, .npz, .h5:NAME, a TensorDict folder or an image folder"
            )
    if kind == "images" and shape is None:  # one size everywhere: that is the shape, nothing resized
        from iobench.data.image_shape import inferred_shape

        shape = inferred_shape([p for p, _ in _image_files(path)], text)
    if kind == "images":
        if len(shape) != 3 or shape[0] not in (1, 3):
            raise IobenchError(f"--from {text}: --shape for images is C,H,W with C 1 or 3, got {shape}")
    elif shape is not None:
        raise IobenchError(f"--from {text}: --shape applies to image folders; an array keeps its own shape")
    if kind == "npz":
        feat, lab = features_key or "features", labels_key or ""
        if labels_key is None and zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:  # the default key when the archive has it; zeros otherwise
                lab = "labels" if "labels.npy" in archive.namelist() else ""
    elif kind == "tensordict":
        feat, lab = features_key or "features", labels_key or "labels"
    elif kind == "hdf5":
        if not inner:
            raise IobenchError(f"--from {text}: name the dataset inside the file, e.g. {path_text}:features")
        feat, lab = inner, ""
    else:
        feat, lab = "", ""
    if labels is not None:
        if kind not in ("npy", "hdf5"):
            raise IobenchError(f"--labels is for .npy and .h5 sources; for {kind} use --labels-key")
        label_path, colon, name = labels.partition(":") if kind == "hdf5" else (labels, "", "")
        lab = str(Path(label_path).expanduser().resolve()) + colon + name  # the writers may run elsewhere
    if kind == "images":
        files = _image_files(path)
        size = sum(p.stat().st_size for p, _ in files)
        mtime = max(p.stat().st_mtime for p, _ in files)
    elif path.is_dir():
        children = [path / "meta.json", *(path / f"{key}.memmap" for key in (feat, lab))]
        stats = [p.lstat() for p in children if p.is_file() and not p.is_symlink()]
        size = sum(st.st_size for st in stats)
        mtime = max((st.st_mtime for st in stats), default=0.0)
    else:
        size, mtime = path.stat().st_size, path.stat().st_mtime
    info = SourceInfo(kind, str(path), feat, lab, size, mtime, tuple(shape or ()))
    return check(info, text)


def check(info: SourceInfo, text: str) -> Opened:
    try:
        with reading(info) as (features, labels, n, shape, dtype):
            dtype_name = _dtype_name(dtype, text)
            if labels is None:
                n_classes = 1
            else:
                n_classes = _check_labels(labels, n, text)
            return Opened(info, n, tuple(shape), dtype_name, n_classes)
    except IobenchError:
        raise
    except RecursionError:
        raise IobenchError(f"--from {text}: cannot read it (nested too deep)") from None
    except Exception as exc:  # OSError, ValueError, BadZipFile, zlib.error, NotImplementedError (PPMd), ...
        raise IobenchError(f"--from {text}: cannot read it ({type(exc).__name__}: {one_line(exc)})") from None


def _dtype_name(dtype: np.dtype, text: str) -> str:
    name = np.dtype(dtype).name  # byte order aside: >f4 is float32 too
    if name not in SUPPORTED_DTYPES:
        raise IobenchError(
            f"--from {text}: features of dtype {dtype} are not supported ({', '.join(SUPPORTED_DTYPES)})"
        )
    return name


def _check_labels(labels: Any, n: int, text: str) -> int:
    if len(labels) != n:
        raise IobenchError(f"--from {text}: {n:,} samples but {len(labels):,} labels")
    if not np.issubdtype(np.dtype(labels.dtype), np.integer):
        raise IobenchError(f"--from {text}: labels must be integers, got {labels.dtype}")
    low, high = 0, -1
    step = 2**22
    for start in range(0, n, step):
        part = np.asarray(labels[start : start + step])
        if part.ndim != 1:
            raise IobenchError(f"--from {text}: labels must be one integer per sample, got shape {labels.shape}")
        low, high = min(low, int(part.min())), max(high, int(part.max()))
    if low < 0:
        raise IobenchError(f"--from {text}: labels must be >= 0 (class indices), found {low}")
    return max(1, high + 1)


class reading:  # noqa: N801 - used as a context manager, like open()
    """(features, labels or None, n, shape, dtype) of a source, open while inside."""

    def __init__(self, info: SourceInfo) -> None:
        self.info = info
        self._close: list[Any] = []

    def __enter__(self) -> tuple[Any, Any, int, tuple[int, ...], np.dtype]:
        info, path = self.info, Path(self.info.path)
        if info.kind == "npy":
            features = _RawRows.of_npy(path)
            self._close.append(features)
            labels = _RawRows.of_npy(Path(info.labels)) if info.labels else None
            if labels is not None:
                self._close.append(labels)
        elif info.kind == "npz":
            features = _NpzMember(path, info.features)
            # Streamed like the features, after its declared length is checked (a 1 MB member may
            # declare 2^40 labels, or inflate to gigabytes).
            labels = _NpzMember(path, info.labels) if info.labels else None
        elif info.kind == "hdf5":
            import h5py

            check_regular(path)
            f = h5py.File(path, "r")
            self._close.append(f)
            features = _h5_dataset(f, info.features)
            labels = None
            if info.labels:
                lpath, _, lname = info.labels.rpartition(":")
                same_file = Path(lpath).resolve() == path
                if not same_file:
                    check_regular(lpath)
                g = f if same_file else h5py.File(lpath, "r")
                if g is not f:
                    self._close.append(g)
                labels = _h5_dataset(g, lname)
        elif info.kind == "tensordict":
            features, labels = _tensordict_entries(path, info.features, info.labels)
            self._close += [features, labels]
        else:
            files = _image_files(path)
            features = _Images(files, info.image_shape)
            labels = np.array([label for _, label in files], dtype=LABEL_DTYPE)
        if features.ndim < 2 or len(features) == 0:
            raise ValueError(f"features must be one sample per row, got shape {features.shape}")
        return features, labels, len(features), tuple(features.shape[1:]), features.dtype

    def __exit__(self, *exc: object) -> None:
        for f in self._close:
            f.close()


def source_chunks(info: SourceInfo, rows: int, start: int, stop: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(first sample, features, int64 labels) in order, rows at a time, from start to stop."""
    with reading(info) as (features, labels, n, shape, dtype):
        for lo in range(start, stop, rows):
            hi = min(lo + rows, stop)
            f = np.ascontiguousarray(features[lo:hi]).astype(np.dtype(dtype).newbyteorder("<"), copy=False)
            lab = np.zeros(hi - lo, LABEL_DTYPE) if labels is None else np.asarray(labels[lo:hi]).astype(LABEL_DTYPE)
            yield lo, f, lab


def _h5_dataset(f: Any, name: str) -> Any:
    from iobench.formats.hdf5 import stored_inside

    dataset = stored_inside(f, name)
    if dataset is None:
        raise KeyError(f"no dataset {name!r} in {f.filename}")
    return dataset


def _tensordict_entries(folder: Path, features: str, labels: str) -> tuple[_RawRows, _RawRows]:
    """The two entries of a TensorDict memmap folder, from its meta.json read as JSON.

    tensordict itself is never asked: `load_memmap` maps the files writable and grows one that is
    shorter than meta.json declares (zeroing its first byte), through a link if there is one."""
    fd = open_regular(folder / "meta.json")
    with open(fd, "rb") as f:
        text = f.read(META_JSON_BYTES + 1)
    if len(text) > META_JSON_BYTES:
        raise ValueError("meta.json is larger than a TensorDict's description")
    meta = json.loads(text)
    if not isinstance(meta, dict) or "TensorDict" not in str(meta.get("_type", "")):
        raise ValueError("meta.json does not describe a TensorDict")
    entries = []
    for key in (features, labels):
        entry = meta.get(key)
        if "/" in key or key.startswith(".") or not isinstance(entry, dict) or "shape" not in entry:
            keys = sorted(k for k, v in meta.items() if isinstance(v, dict) and "shape" in v)
            raise KeyError(f"the TensorDict holds {keys}; need {features!r} and {labels!r} as tensors")
        dtype = str(entry.get("dtype", "")).removeprefix("torch.")
        shape = entry["shape"]
        if dtype not in SUPPORTED_DTYPES or not isinstance(shape, list) or not shape:
            raise ValueError(f"{key!r}: a {entry.get('dtype')} tensor of shape {shape} is not supported")
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ValueError(f"{key!r}: shape {shape} is not a list of sizes")
        entries.append(_RawRows(folder / f"{key}.memmap", 0, tuple(shape), np.dtype(dtype)))
    return entries[0], entries[1]


class _RawRows:
    """Rows of a C-ordered array in a file, read with plain reads: a memory map of the source would
    count every page read in the process's RSS (a 2 GB source: 2 GB of RSS)."""

    def __init__(self, path: Path, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
        # Read-only, no link followed, no FIFO waited on: closed by reading.__exit__.
        self.file = open(open_regular(path), "rb")  # noqa: SIM115
        self.offset, self.shape, self.dtype, self.ndim = offset, shape, np.dtype(dtype), len(shape)
        self.row_bytes = int(np.prod(shape[1:], dtype=object)) * self.dtype.itemsize
        if os.fstat(self.file.fileno()).st_size < offset + shape[0] * self.row_bytes:
            self.file.close()
            raise ValueError(f"{path.name} is shorter than its {shape} {self.dtype} need")

    @classmethod
    def of_npy(cls, path: Path) -> _RawRows:
        with open(open_regular(path), "rb") as f:
            shape, fortran, dtype = read_header(f)
            offset = f.tell()
        if fortran or dtype.hasobject or not shape:
            raise ValueError(f"{path.name}: features must be C-ordered numbers, one sample per row")
        return cls(path, offset, tuple(shape), dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, _ = rows.indices(len(self))
        out = np.empty((stop - start, *self.shape[1:]), dtype=self.dtype)
        view = memoryview(out).cast("B")
        if pread_full(self.file.fileno(), view, self.offset + start * self.row_bytes) < len(view):
            raise ValueError("the source file ended early")
        return out

    def close(self) -> None:
        self.file.close()


class _NpzMember:
    """One array of an .npz, read front to back out of the archive (stored or deflated) without
    loading it whole; slices must come in increasing order, as the writers read them."""

    def __init__(self, path: Path, key: str) -> None:
        check_regular(path)
        self.zip = zipfile.ZipFile(path)
        name = f"{key}.npy"
        if name not in self.zip.namelist():
            keys = [n.removesuffix(".npy") for n in self.zip.namelist()]
            raise KeyError(f"no array {key!r} in the archive (it holds {', '.join(keys)})")
        self.stream = self.zip.open(name)
        shape, fortran, self.dtype = read_header(self.stream)
        if fortran or self.dtype.hasobject or not shape:
            raise ValueError(f"array {key!r} must be C-ordered numbers, one sample per row")
        self.shape = tuple(shape)
        self.ndim = len(self.shape)
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        self.position = 0

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, _ = rows.indices(len(self))
        if start < self.position:
            raise ValueError("an .npz member is read in order")
        skip = (start - self.position) * self.row_bytes
        while skip > 0:  # in pieces: a skip is not a reason to hold gigabytes
            skipped = len(self.stream.read(min(skip, 2**24)))
            if not skipped:
                break
            skip -= skipped
        data = self.stream.read((stop - start) * self.row_bytes)
        self.position = stop
        if len(data) != (stop - start) * self.row_bytes:
            raise ValueError("the archive member is shorter than its header says")
        return np.frombuffer(data, dtype=self.dtype).reshape(stop - start, *self.shape[1:])


def _image_files(root: Path) -> list[tuple[Path, int]]:
    # A link (class folder, sub-folder or image) is refused, never followed: it could lead anywhere
    # (a class folder linked to /usr was crawled whole).
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


class _Images:
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
        from PIL import Image

        channels, height, width = self.shape[1:]
        path = self.files[index][0]
        try:
            with open(open_regular(path), "rb") as f, Image.open(f) as image:
                if image.width * image.height > MAX_IMAGE_PIXELS:  # the header only: nothing decoded yet
                    raise ValueError(
                        f"{image.width}x{image.height} pixels, more than the {MAX_IMAGE_PIXELS:,} iobench decodes"
                    )
                image = image.convert("RGB" if channels == 3 else "L")
                scale = max(width / image.width, height / image.height)
                size = (max(width, round(image.width * scale)), max(height, round(image.height * scale)))
                image = image.resize(size, Image.BILINEAR)
                left, top = (size[0] - width) // 2, (size[1] - height) // 2
                pixels = np.asarray(image.crop((left, top, left + width, top + height)))
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
            raise ValueError(f"{path}: not a readable image ({exc})") from None
        return pixels[None] if channels == 1 else np.moveaxis(pixels, -1, 0)
