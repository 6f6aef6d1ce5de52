"""A TensorDict memmap folder with a features and a labels entry: its meta.json is read as JSON and the
`.memmap` files with plain reads. tensordict itself is never asked: `load_memmap` maps the files
writable and grows one that is shorter than meta.json declares (zeroing its first byte), through a link
if there is one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from iobench.data.sources.arrays import RawRows
from iobench.data.sources.base import SourceKind
from iobench.spec import SUPPORTED_DTYPES, SourceInfo
from iobench.system.fsutil import open_regular, parse_json

META_JSON_BYTES = 2**20  # a TensorDict's meta.json describes a few entries: a larger one is refused


def entries(folder: Path, features: str, labels: str) -> tuple[RawRows, RawRows]:
    """The two entries of a TensorDict memmap folder, from its meta.json read as JSON."""
    fd = open_regular(folder / "meta.json")
    with open(fd, "rb") as f:
        text = f.read(META_JSON_BYTES + 1)
    if len(text) > META_JSON_BYTES:
        raise ValueError("meta.json is larger than a TensorDict's description")
    meta = parse_json(text, folder / "meta.json", META_JSON_BYTES)
    if not isinstance(meta, dict) or "TensorDict" not in str(meta.get("_type", "")):
        raise ValueError("meta.json does not describe a TensorDict")
    found = []
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
        found.append(RawRows(folder / f"{key}.memmap", 0, tuple(shape), np.dtype(dtype)))
    return found[0], found[1]


class TensorDictSource(SourceKind):
    name = "tensordict"

    def matches(self, path: Path) -> bool:
        return path.is_dir() and (path / "meta.json").is_file()

    def keys(
        self, path: Path, inner: str, features_key: str | None, labels_key: str | None, text: str
    ) -> tuple[str, str]:
        return features_key or "features", labels_key or "labels"

    def footprint(self, path: Path, features: str, labels: str) -> tuple[int, float]:
        children = [path / "meta.json", *(path / f"{key}.memmap" for key in (features, labels))]
        stats = [p.lstat() for p in children if p.is_file() and not p.is_symlink()]
        return sum(st.st_size for st in stats), max((st.st_mtime for st in stats), default=0.0)

    def open(self, info: SourceInfo, closing: list[Any]) -> tuple[Any, Any]:
        features, labels = entries(Path(info.path), info.features, info.labels)
        closing += [features, labels]
        return features, labels
