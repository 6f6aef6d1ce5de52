"""The registry of storage formats: name -> format. Nothing else lives here."""

from __future__ import annotations

from iobench.formats.base import StorageFormat
from iobench.formats.files import FilesFormat
from iobench.formats.hdf5 import Hdf5Format
from iobench.formats.lmdb import LmdbFormat
from iobench.formats.memmap import MemmapFormat
from iobench.formats.npy import NpyFormat

FORMATS: dict[str, StorageFormat] = {
    f.name: f for f in (NpyFormat(), Hdf5Format(), LmdbFormat(), MemmapFormat(), FilesFormat())
}
