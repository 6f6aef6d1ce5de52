"""files: one file per sample, the layout of ImageFolder datasets and of DLIO's png/npz workloads.

Image-shaped uint8 samples (H,W; C,H,W or H,W,C with 1, 3 or 4 channels) are lossless PNG; other
samples are one .npy each. With `encoding="source"` (prepare --from an image folder, --format-option
source) each sample is its source image file copied byte for byte, so a JPEG folder stays JPEG: the
writer decodes every copy and checks it equals the shared sample, so only folders whose images already
have the dataset's shape qualify (resized images would not be the files kept). Samples are spread over
sub-folders of PER_FOLDER files (a directory of hundreds of thousands of entries is slow on every file
system); labels are one index file, `labels.npy`. Reads decode on every access, as a training job does.

PNG is decoded with Pillow: it is what torchvision's ImageFolder uses by default, it is maintained,
it ships wheels for every platform, and it does not tie iobench to a torchvision build matching the
installed torch. It is encoded by `formats/png.py` (filters chosen for a whole chunk in numpy, zlib
per image), because Pillow's encode holds the GIL: with it the writer topped out near 3,000 small
images/s on any number of threads. The writer encodes and writes each chunk's part of one folder per
task, on a thread per core; deflate and the file system calls release the GIL.
"""

from __future__ import annotations

import hashlib
import io
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from iobench.errors import IobenchError
from iobench.formats import photos
from iobench.formats.base import FormatReader, FormatWriter, HashedFile, ReaderTraits, StorageFormat
from iobench.formats.files_layout import (
    FILLER_PIECE,
    FILLER_STREAM,
    KEPT_AS_IS,
    LABELS,
    MAX_ENCODED_BYTES,
    PER_FOLDER,
    FilesOptions,
    decode_image,
    decode_sample,
    file_sizes,
    kept_suffix,
    photos_of_other_sizes,
    png_axes,
    sample_path,
    source_images,
)
from iobench.formats.npy import check_header, checked_header, npy_header
from iobench.formats.png import encode_png
from iobench.spec import LABEL_DTYPE, Chunk, DatasetSpec
from iobench.system.fsutil import FOLDER_OPEN_FLAGS, open_beneath, open_regular


class FilesWriter(FormatWriter):
    ENCODE_BATCH = 64  # images filtered at once: enough to vectorise, small enough for the caches

    def __init__(self, directory: Path, spec: DatasetSpec, options: FilesOptions) -> None:
        super().__init__(directory, spec, options)
        self.suffix = options.file_suffix
        self.axes = png_axes(spec.shape)
        self.sources = source_images(spec) if options.encoding in ("source", "photos") else []
        self.photos = options.encoding == "photos"
        self.labels = HashedFile(directory / LABELS)
        self.labels.write(npy_header(LABEL_DTYPE, (spec.n_samples,)))
        self._digests: dict[str, str] = {}
        self._folders: set[str] = set()
        self._pool = ThreadPoolExecutor(len(os.sched_getaffinity(0)), thread_name_prefix="files-write")
        self.sizes = file_sizes(spec, options)

    def _encode(self, start: int, features: np.ndarray) -> list[bytes]:
        if self.sources:
            return [self._kept(index, sample) for index, sample in enumerate(features, start)]
        if self.suffix == "png":
            return encode_png(features, self.axes or "")
        encoded = []
        for sample in features:
            out = io.BytesIO()
            np.lib.format.write_array(out, np.ascontiguousarray(sample), allow_pickle=False)
            encoded.append(out.getvalue())
        return encoded

    def _kept(self, index: int, sample: np.ndarray) -> bytes:
        """Source image `index` as it is, once its decoding is checked to be the shared sample (a photo: once its
        header says a JPEG or PNG of at most photos.MAX_IMAGE_PIXELS; prepare decoded it already)."""
        path = self.sources[index]
        with open(open_regular(path), "rb") as f:
            data = f.read()
        if self.photos:
            photos.opened(io.BytesIO(data), str(path)).close()
            return data
        try:
            decoded = decode_image(io.BytesIO(data), self.spec, self.axes or "", str(path), self.suffix)
        except ValueError as exc:
            raise IobenchError(f"--format-option files.encoding=source: {exc}; {KEPT_AS_IS}") from None
        if not np.array_equal(decoded, sample):
            raise IobenchError(
                f"--format-option files.encoding=source: {path} decodes to other pixels than prepare read; {KEPT_AS_IS}"
            )
        return data

    def _write_folder(self, start: int, features: np.ndarray) -> list[tuple[str, str]]:
        """Samples start.. of one folder: threads creating files in one directory contend for its
        lock (measured: several times the kernel time per file), so each thread takes a folder."""
        written = []
        for first in range(0, len(features), self.ENCODE_BATCH):
            batch = self._encode(start + first, features[first : first + self.ENCODE_BATCH])
            for index, data in enumerate(batch, start + first):
                relative = sample_path(index, self.spec, self.suffix)
                digest = hashlib.sha256(data)
                with open(self.directory / relative, "xb") as f:
                    f.write(data)
                    if self.sizes is not None:
                        self._fill(f, digest, index, int(self.sizes[index]) - len(data))
                written.append((relative, digest.hexdigest()))
        return written

    def _fill(self, f: BinaryIO, digest: Any, index: int, nbytes: int) -> None:
        """Sample `index`'s filler: random bytes of its own stream of the seed (no file system compresses or
        deduplicates them into less than the size drawn), written and hashed a piece at a time."""
        rng = np.random.default_rng([self.spec.seed, FILLER_STREAM, index])
        while nbytes > 0:
            piece = rng.bytes(min(nbytes, FILLER_PIECE))
            f.write(piece)
            digest.update(piece)
            nbytes -= len(piece)

    def write(self, chunk: Chunk) -> None:
        boundaries = range(chunk.start - chunk.start % PER_FOLDER + PER_FOLDER, chunk.stop, PER_FOLDER)
        starts = [chunk.start, *boundaries]
        for start in starts:
            folder = sample_path(start, self.spec, self.suffix).rsplit("/", 1)[0]
            if folder not in self._folders:
                (self.directory / folder).mkdir(parents=True, exist_ok=True)
                self._folders.add(folder)
        ranges = zip(starts, [*starts[1:], chunk.stop], strict=True)  # the chunk's part in each folder
        offset = chunk.start
        jobs = [self._pool.submit(self._write_folder, a, chunk.features[a - offset : b - offset]) for a, b in ranges]
        for job in jobs:  # result() re-raises a thread's error
            self._digests.update(job.result())
        self.labels.write(chunk.labels)

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)
        if (digest := self.labels.close()) is not None:
            self._digests[LABELS] = digest

    def digests(self) -> dict[str, str]:
        return self._digests


class _Handle:
    """The labels and the format folder, opened once: every sample is opened beneath it. Closes
    itself when dropped unclosed, as the file objects of the other readers do."""

    def __init__(self, labels: np.ndarray, root: int, sizes: np.ndarray | None) -> None:
        self.labels, self.root, self.sizes = labels, root, sizes

    def close(self) -> None:
        if self.root >= 0:
            self.labels._mmap.close()
            os.close(self.root)
            self.root = -1

    def __del__(self) -> None:
        self.close()


class FilesReader(FormatReader):
    def _open(self) -> _Handle:
        check_header(self.directory / LABELS, np.dtype(LABEL_DTYPE), (self.spec.n_samples,))
        labels = np.load(self.directory / LABELS, mmap_mode="r", allow_pickle=False)
        return _Handle(labels, os.open(self.directory, FOLDER_OPEN_FLAGS), file_sizes(self.spec, self.options))

    def _close(self, handle: _Handle) -> None:
        handle.close()

    def _features(self, index: int) -> np.ndarray:
        spec, suffix = self.spec, self.options.file_suffix
        relative = sample_path(index, spec, suffix)
        # Each component opened without following links, beneath the folder opened at the start: a
        # sample or a sample folder swapped for a link (even mid-run) cannot lead outside; a FIFO
        # planted as a sample is refused instead of waited on.
        fd = open_beneath(self.handle.root, relative)
        with open(fd, "rb") as f:
            return decode_sample(f, spec, self.options, relative, self.rng, self._drawn_bytes(index))

    def _drawn_bytes(self, index: int) -> int:
        """Sample `index`'s file size where the files are of a size distribution (`file_sizes`); 0 otherwise."""
        sizes = self.handle.sizes
        return 0 if sizes is None else int(sizes[index])

    @property
    def rng(self) -> np.random.Generator:
        """A kept photo's random crops: a stream of this process's (each DataLoader worker draws its own)."""
        if getattr(self, "_rng_pid", None) != os.getpid():
            self._rng, self._rng_pid = np.random.default_rng([self.spec.seed, os.getpid()]), os.getpid()
        return self._rng

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        labels = self.handle.labels
        features, _ = self._empty(len(indices))
        for row, index in enumerate(indices):
            features[row] = self._features(int(index))
        return features, np.array(labels[indices])

    def encoded_batch(self, indices: np.ndarray) -> tuple[list[bytes], np.ndarray]:
        """Each sample's image file as it is, opened as `batch` opens it (beneath the folder, no link followed) and
        read whole, at most MAX_ENCODED_BYTES (a file swapped for a larger one mid-run is refused, not read)."""
        return [self._file_bytes(int(index)) for index in indices], np.array(self.handle.labels[indices])

    def _file_bytes(self, index: int) -> bytes:
        relative = sample_path(index, self.spec, self.options.file_suffix)
        with open(open_beneath(self.handle.root, relative), "rb") as f:
            data = f.read(MAX_ENCODED_BYTES + 1)
        if len(data) > MAX_ENCODED_BYTES:
            raise ValueError(f"{relative}: more than {MAX_ENCODED_BYTES:,} bytes: not an image this format wrote")
        return data


class _ObjectHandle:
    def __init__(self, labels: np.ndarray, dataset: Any, sizes: np.ndarray | None) -> None:
        self.labels, self.dataset, self.sizes = labels, dataset, sizes

    def close(self) -> None:
        self.dataset = None


class FilesObjectReader(FilesReader):
    """Samples by index through s3torchconnector's `S3MapDataset` (`files_remote`) over the labels object and
    every sample's object in index order (item 0 the labels, item i + 1 sample i): one GET of a whole object per
    sample, decoded with the local checks. Its client is made in the process that reads."""

    traits = ReaderTraits(imports=("s3torchconnector",))

    @property
    def _deadline(self) -> Any:
        """s3torchconnector has no timeout to set: each GET is waited for at most the storage's bound."""
        from iobench.storage.remote.bounds import Deadline

        if getattr(self, "_deadline_", None) is None:
            self._deadline_ = Deadline()
        return self._deadline_

    def __getstate__(self) -> dict:
        """A copy (a thread's, a worker's) waits on its own thread: one shared would make their reads take turns."""
        return {**super().__getstate__(), "_deadline_": None}

    def _local_directory(self) -> Path | None:
        return None

    def _open(self) -> _ObjectHandle:
        from iobench.formats.files_remote import open_objects

        spec = self.spec
        names = [LABELS, *(sample_path(i, spec, self.options.file_suffix) for i in range(spec.n_samples))]
        dataset, data = self._deadline.call(lambda: open_objects(self.storage, names), self.storage.url(LABELS))
        where = self.storage.url(LABELS)
        offset = checked_header(where, io.BytesIO(data), len(data), np.dtype(LABEL_DTYPE), (spec.n_samples,))
        labels = np.frombuffer(data, dtype=LABEL_DTYPE, offset=offset)
        return _ObjectHandle(labels, dataset, file_sizes(spec, self.options))

    def _close(self, handle: _ObjectHandle) -> None:
        handle.close()

    def _file_bytes(self, index: int) -> bytes:
        from iobench.storage.remote import client_counts

        relative = sample_path(index, self.spec, self.options.file_suffix)
        dataset = self.handle.dataset
        data = self._deadline.call(lambda: dataset[index + 1].read(), self.storage.url(relative))
        client_counts.add("GET", len(data))  # one GET of the whole object (s3torchconnector counts none for us)
        return data

    def _features(self, index: int) -> np.ndarray:
        relative = sample_path(index, self.spec, self.options.file_suffix)
        data = io.BytesIO(self._file_bytes(index))
        return decode_sample(data, self.spec, self.options, relative, self.rng, self._drawn_bytes(index))


class FilesFormat(StorageFormat):
    name = "files"
    libraries = ("pillow",)  # what reads it (distribution names), for the record's `packages`
    options_type = FilesOptions
    python_bound_writer = True
    writer_type = FilesWriter
    reader_type = FilesReader

    def object_reader(self, options: Any = None) -> type[FormatReader]:
        return FilesObjectReader

    def resolve_options(self, spec: DatasetSpec, options: FilesOptions) -> FilesOptions:
        image = spec.dtype == "uint8" and png_axes(spec.shape) is not None
        if options.encoding == "png" and not image:
            raise IobenchError(f"files: PNG needs image-shaped uint8 samples (H,W[,C] or C,H,W), got {spec.shape}")
        if options.encoding == "auto" and image and photos_of_other_sizes(spec):
            return FilesOptions("photos", crop=options.crop)
        if options.encoding == "auto":
            encoding = "npy" if options.file_bytes or not image else "png"
            return replace(options, encoding=encoding)
        if options.encoding == "source" and not options.suffix:
            return FilesOptions("source", kept_suffix(spec))
        return options

    def encoded_refusal(self, options: FilesOptions) -> str | None:
        if options.file_suffix == "npy":
            return "files holds .npy samples here (files.encoding=npy): nothing is left to decode"
        return None

    def check_layout(self, directory: Path, spec: DatasetSpec, options: FilesOptions) -> None:
        check_header(directory / LABELS, np.dtype(LABEL_DTYPE), (spec.n_samples,))

    def read_bytes(self, spec: DatasetSpec, options: FilesOptions) -> int:
        """A sample file of a size distribution is read whole: the files' mean size and the label."""
        if (sizes := file_sizes(spec, options)) is None:
            return super().read_bytes(spec, options)
        return round(float(sizes.mean())) + LABEL_DTYPE.itemsize

    def verify_options(self, options: FilesOptions) -> FilesOptions:
        """Kept photos read as prepare read them (their centres), so that verify compares them with the dataset."""
        return replace(options, crop="centre")

    def estimate_bytes(self, spec: DatasetSpec, options: FilesOptions) -> int:
        if (
            options.encoding in ("source", "photos") and spec.source is not None
        ):  # the files as they are, in 4 KiB blocks
            return spec.source.bytes + spec.n_samples * (4096 + LABEL_DTYPE.itemsize) + 4096
        if (sizes := file_sizes(spec, options)) is not None:  # each file its drawn size, in 4 KiB blocks
            return int((-(-sizes // 4096) * 4096).sum()) + spec.n_samples * LABEL_DTYPE.itemsize + 4096
        # PNG can exceed the raw size by a little on noise; npy adds a 128-byte header; 4 KiB blocks.
        per_sample = -(-(int(spec.feature_bytes * 1.01) + 256) // 4096) * 4096
        return spec.n_samples * per_sample + spec.n_samples * LABEL_DTYPE.itemsize + 4096
