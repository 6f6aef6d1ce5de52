"""Arrow in object storage, read as Hugging Face documents streaming it: `load_dataset("arrow", data_files=[s3 URLs],
streaming=True, storage_options=...)`, an IterableDataset that reads each file front to back as record batches
through s3fs, caching nothing locally, shuffled by a buffer (`.shuffle(seed=, buffer_size=)`) rather than by index.
(`load_from_disk("s3://...")` would download every file before the first sample.)

What the library is handed is checked first: the data files are the manifest's, each a plain name (an fsspec
path with `*`, `?`, `[`, `::` or `#` would be a pattern, a chain or a fragment to it). It is given the writer's
schema (`features=`, as load_dataset documents): it infers none (an inference read moved the whole first file
before the stream moved it again), decodes no feature type the file's metadata might declare, and casts every
record batch to that schema, refusing one that does not fit."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def data_urls(storage: Any) -> list[str]:
    """The s3:// URL of each .arrow file of the format's objects, in order, once every part is a plain name."""
    names = [name for name in storage.files() if name.endswith(".arrow")]
    if not names:
        raise ValueError(f"{storage.where}: no .arrow data files")
    return [f"s3://{storage.fsspec_path(name)}" for name in sorted(names)]


def stream(storage: Any, features: Any, cache: Path) -> Any:
    """The IterableDataset its users open, read with the writer's `features`; datasets keeps its lock files in
    `cache` (the reader's folder, recorded as its cache: streaming keeps no data there)."""
    import datasets

    datasets.disable_progress_bars()
    return datasets.load_dataset(
        "arrow",
        data_files=data_urls(storage),
        split="train",
        streaming=True,
        features=features,
        storage_options=storage.s3fs_options(),
        cache_dir=str(cache),
    )
