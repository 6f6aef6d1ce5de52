"""`F.h5:features`, labels `--labels F.h5:labels`: datasets stored inside the file only (external
storage, external links and virtual datasets are refused by formats/hdf5.py's `stored_inside`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iobench.data.sources.base import SourceKind
from iobench.errors import IobenchError
from iobench.spec import SourceInfo
from iobench.system.fsutil import check_regular


def _dataset(f: Any, name: str) -> Any:
    from iobench.formats.hdf5 import stored_inside

    dataset = stored_inside(f, name)
    if dataset is None:
        raise KeyError(f"no dataset {name!r} in {f.filename}")
    return dataset


class Hdf5Source(SourceKind):
    name = "hdf5"
    suffixes = (".h5", ".hdf5")
    takes_labels_file = True

    def keys(
        self, path: Path, inner: str, features_key: str | None, labels_key: str | None, text: str
    ) -> tuple[str, str]:
        if not inner:
            raise IobenchError(f"--from {text}: name the dataset inside the file, e.g. {text}:features")
        return inner, ""

    def open(self, info: SourceInfo, closing: list[Any]) -> tuple[Any, Any]:
        import h5py

        path = Path(info.path)
        check_regular(path)
        f = h5py.File(path, "r")
        closing.append(f)
        features = _dataset(f, info.features)
        if not info.labels:
            return features, None
        lpath, _, lname = info.labels.rpartition(":")
        same_file = Path(lpath).resolve() == path
        if not same_file:
            check_regular(lpath)
        g = f if same_file else h5py.File(lpath, "r")
        if g is not f:
            closing.append(g)
        return features, _dataset(g, lname)
