"""The registry of storage formats: name -> format. Nothing else lives here.

A format's module is imported when the format is first used, not when the registry is: listing the
names (for `--help`, for parsing `--formats`) must not load torch, tensordict, h5py or lmdb. Besides
the built-in formats, a package can add one through the `iobench.formats` entry-point group
(`name = "package.module:FormatClass"`, a `StorageFormat` subclass): it is listed like the others,
written when named (or with `all`), and read by the loaders that read any format.
"""

from __future__ import annotations

from iobench.formats.registry import (
    ENTRY_POINT_GROUP,
    FIXED_LAYOUT,
    PIPELINE,
    Registered,
    Registry,
    capabilities,
    missing,
    plug_ins,
)

__all__ = [
    "DEFAULT_FORMATS",
    "ENTRY_POINT_GROUP",
    "FIXED_LAYOUT",
    "FORMATS",
    "PIPELINE",
    "Registered",
    "Registry",
    "capabilities",
    "missing",
    "plug_ins",
]

FORMATS = Registry(
    (
        Registered("npy", "iobench.formats.npy:NpyFormat", declares=frozenset({FIXED_LAYOUT})),
        Registered("hdf5", "iobench.formats.hdf5:Hdf5Format"),
        Registered("lmdb", "iobench.formats.lmdb:LmdbFormat"),
        Registered("memmap", "iobench.formats.memmap:MemmapFormat", declares=frozenset({FIXED_LAYOUT})),
        # one file per sample: a million files for the default size, so written only when named
        Registered("files", "iobench.formats.files:FilesFormat", default=False),
        # the formats people choose today, each written and read by its own library (an extra each)
        Registered(
            "webdataset", "iobench.formats.webdataset:WebDatasetFormat", False, "webdataset", frozenset({PIPELINE})
        ),
        Registered("arrow", "iobench.formats.arrow:ArrowFormat", False, "datasets", frozenset({PIPELINE})),
        Registered("zarr", "iobench.formats.zarr:ZarrFormat", False, "zarr", frozenset({PIPELINE})),
        Registered("tfrecord", "iobench.formats.tfrecord:TFRecordFormat", False, "tfrecord", frozenset({PIPELINE})),
        Registered("litdata", "iobench.formats.litdata:LitDataFormat", False, "litdata", frozenset({PIPELINE})),
        Registered("lance", "iobench.formats.lance:LanceFormat", False, "lance", frozenset({PIPELINE})),
    )
)
for _plug_in in plug_ins(refused=FORMATS.refused):
    FORMATS.register(_plug_in)
DEFAULT_FORMATS = FORMATS.defaults
