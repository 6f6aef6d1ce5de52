"""`--loader dali`: NVIDIA DALI's own image pipeline as its documentation builds one, handed to PyTorch by
`DALIGenericIterator`, over the photos (or PNG and JPEG files) a `files` dataset keeps.

`fn.readers.file(files=..., random_shuffle=...)` reads the encoded files (its shuffle buffer is its own shuffling;
`pad_last_batch` makes an epoch the dataset once: without it an epoch crossed into the next, 355 distinct of 400
samples), `fn.decoders.image` decodes ("mixed" on CUDA: the bytes cross to the device and nvJPEG decodes them; "cpu"
in DALI's CPU-only mode, `device_id=None`), `fn.random_resized_crop` crops a photo to the sample's shape
(`files.crop=centre`: a resize of the shorter side and a centre crop, as prepare cropped), and `fn.transpose` makes
it CHW. `--num-workers` is its `num_threads`, `--prefetch-factor` its `prefetch_queue_depth`. The file reader's label
output carries each sample's index: the delivered order, and each sample's label looked up from it.

The pipeline is built before the clock (`prepare`, as a script builds it before its loop). DALI cannot reset an
iterator mid-epoch, so an epoch cut short (`--max-batches`, an interruption) has its pipeline rebuilt before the
next. DALI reads the files itself: its threads end when its pipeline is deleted, before iobench's reader closes.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from iobench.errors import IobenchError
from iobench.formats.files_layout import png_axes, sample_path
from iobench.loaders.base import Loader, LoaderContext
from iobench.loaders.dataloader import carried_order

IMAGE_SUFFIXES = ("img", "png", "jpg")  # the files' encodings that hold images DALI decodes (not npy)


def dali_refusal(spec: Any, options: Any) -> str | None:
    """Why DALI's image pipeline cannot read this `files` dataset; None if it can."""
    if options.file_suffix not in IMAGE_SUFFIXES or png_axes(spec.shape) is None or spec.dtype != "uint8":
        return (
            "--loader dali reads files of images (photos, PNG, JPEG) with DALI's image decoder; this dataset's "
            "samples are .npy files"
        )
    return None


class DaliLoader(Loader):
    def __init__(self, ctx: LoaderContext) -> None:
        super().__init__(ctx.order, ctx.settings, ctx.device)
        reader = ctx.reader
        self.reader = reader
        self.options = reader.options
        spec = reader.spec
        if (why := dali_refusal(spec, self.options)) is not None:
            reader.close()
            raise IobenchError(why)
        if ctx.transform is not None:
            reader.close()
            raise IobenchError("--loader dali runs DALI's own augmentation: use --transform-on device")
        self.spec, self.axes = spec, png_axes(spec.shape)
        directory = reader._local_directory()
        if directory is None:
            reader.close()
            raise IobenchError("--loader dali reads local files; object storage is read by dataloader or nodes")
        self.files = [str(directory / sample_path(i, spec, self.options.file_suffix)) for i in range(spec.n_samples)]
        self.labels = np.asarray(reader.handle.labels, dtype=np.int64)
        self._pipe: Any = None
        self._iterator: Any = None
        self._fresh = False  # the iterator stands at an epoch's start
        self._carried: list[torch.Tensor] = []

    def _pipeline(self) -> Any:
        from nvidia.dali import fn, pipeline_def, types

        cuda = self.device.type == "cuda"
        spec, axes, o, s = self.spec, self.axes, self.order, self.settings
        height, width = spec.shape[1:] if axes == "chw" else spec.shape[:2]
        channels = 1 if axes == "hw" else (spec.shape[0] if axes == "chw" else spec.shape[2])
        if channels not in (1, 3):
            raise IobenchError(f"--loader dali decodes RGB or grayscale images, not {channels} channels")
        photos = self.options.encoding == "photos"

        @pipeline_def(
            batch_size=s.batch_size,
            num_threads=max(1, s.num_workers),
            seed=o.seed,
            device_id=(self.device.index or 0) if cuda else None,
            prefetch_queue_depth=s.prefetch_factor or 2,
        )
        def images() -> Any:
            encoded, index = fn.readers.file(
                files=self.files,
                labels=list(range(len(self.files))),
                random_shuffle=o.shuffle,
                pad_last_batch=True,
                shard_id=o.rank,
                num_shards=o.world,
                name="Reader",
            )
            decoded = fn.decoders.image(
                encoded, device="mixed" if cuda else "cpu", output_type=types.RGB if channels == 3 else types.GRAY
            )
            if photos and self.options.crop == "random":
                decoded = fn.random_resized_crop(decoded, size=(height, width))
            elif photos:
                decoded = fn.resize(decoded, size=(height, width), mode="not_smaller")
                decoded = fn.crop(decoded, crop=(height, width))
            if axes == "chw":
                decoded = fn.transpose(decoded, perm=[2, 0, 1])
            return decoded, index

        return images()

    def _build(self) -> None:
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        self._drop()
        pipe = self._pipeline()
        pipe.build()
        self._pipe = pipe
        self._iterator = DALIGenericIterator(
            pipe,
            ["features", "index"],
            reader_name="Reader",
            last_batch_policy=LastBatchPolicy.PARTIAL,
            auto_reset=True,
        )
        self._fresh = True

    def prepare(self, epoch: int) -> None:
        """The pipeline built before the clock (DALI's own loop builds it before its first epoch); again when the
        epoch before was cut short (DALI's iterators do not reset mid-epoch)."""
        if self._iterator is None or not self._fresh:
            self._build()

    def _batches(self, epoch: int) -> Iterator[Any]:
        if self._iterator is None or not self._fresh:
            self._build()
        self._carried = []
        batches = self._each(self._iterator)
        if self.order.max_batches is not None:
            batches = itertools.islice(batches, self.order.max_batches)
        return batches

    def _each(self, iterator: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        self._fresh = False
        for out in iterator:
            batch = out[0]
            index = batch["index"].reshape(-1).to(torch.int64)
            self._carried.append(index)
            labels = torch.from_numpy(self.labels[index.numpy()])
            features = batch["features"]
            yield (features.squeeze(-1) if self.axes == "hw" else features), labels
        self._fresh = True  # the iterator ran to its epoch's end and reset itself

    def delivered(self, epoch: int, samples: int) -> np.ndarray:
        return carried_order(self._carried, samples)

    def _drop(self) -> None:
        """The iterator and pipeline deleted: DALI's threads end with its pipeline."""
        self._iterator = self._pipe = None
        gc.collect()

    def _stop(self) -> bool:
        if not self._fresh:  # cut short: DALI cannot reset it, its prefetched batches are dropped with it
            self._drop()
        return True

    def _release(self) -> None:
        self._drop()
        self.reader.close()
