"""Readers of a format's objects in object storage that read no sample themselves: one that hands the storage to the
format's own pipeline, and one whose library keeps a local cache folder (LitData's chunks, datasets' locks)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from iobench.formats.base import FormatReader, ReaderTraits
from iobench.spec import DatasetSpec
from iobench.storage import NO_HINTS, ReadHints
from iobench.system.private import private_dir


class PipelineOnlyReader(FormatReader):
    """A format's objects in object storage for its own pipeline only (`StorageFormat.pipeline` reads them by the
    library's remote path): the loaders that read samples by index read the format through FUSE instead."""

    traits = ReaderTraits(pipeline_only=True)

    def _local_directory(self) -> Path | None:
        return None

    def _open(self) -> Any:
        raise ValueError("a format in object storage read by its own pipeline only (--loader native)")

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.handle


class CacheFolderReader(FormatReader):
    """A reader of objects whose library keeps a local cache (LitData's chunks, datasets' lock files): a folder of
    this reader's, made with it, registered with the storage (its size goes in each epoch's record) and removed when
    the process that made it closes the reader, so a cold epoch's fresh reader starts from an empty one."""

    cache_kind: ClassVar[str] = "cache"  # its folders' kind in iobench's own folder (a killed run's are removed)

    def __init__(self, where: Any, spec: DatasetSpec, options: Any, hints: ReadHints = NO_HINTS) -> None:
        super().__init__(where, spec, options, hints)
        self.cache = private_dir(self.cache_kind)
        self._owner = os.getpid()
        where.add_cache(self.cache)

    def close(self) -> None:
        super().close()
        if os.getpid() == self._owner:
            shutil.rmtree(self.cache, ignore_errors=True)
