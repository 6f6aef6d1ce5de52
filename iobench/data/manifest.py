"""manifest.json: what was prepared, where, how big, how long it took, and its checksums.

A format counts as prepared only once its entry is in the manifest, and the manifest is only
ever replaced atomically, so an interrupted prepare cannot leave a complete-looking format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from iobench import __version__
from iobench.errors import IobenchError
from iobench.spec import DatasetSpec
from iobench.system.fsutil import PARTIAL_PREFIX, atomic_write_json, read_json

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
MAX_MANIFEST_BYTES = 2**30  # it lists every file: about 140 MB for a million files of one per sample


@dataclass
class FileEntry:
    path: str
    bytes: int
    sha256: str


def _plain(part: str) -> bool:
    """One path component that names something inside its folder (not '..', no separator)."""
    return part not in ("", ".", "..") and not any(c in part for c in "/\\\0")


def _safe_name(text: object, what: str) -> str:
    """One plain path component: a manifest may come from someone else and must not point elsewhere."""
    if not isinstance(text, str) or not _plain(text):
        raise ValueError(f"{what} {text!r} is not a plain name inside the dataset folder")
    return text


def _safe_relative(text: object, what: str) -> str:
    """A relative path of plain components (no '..', not absolute)."""
    if not isinstance(text, str) or not all(_plain(part) for part in text.split("/")):
        raise ValueError(f"{what} {text!r} is not a relative path inside the dataset folder")
    return text


def _options(value: object) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"format options must be an object, got {type(value).__name__}")
    return value


def inside(dataset_dir: Path, relative: str) -> Path:
    """dataset_dir / relative, refused if it resolves (through links too) outside dataset_dir."""
    path = dataset_dir / relative
    root = dataset_dir.resolve()
    if not path.resolve().is_relative_to(root):
        raise IobenchError(f"{path} leads outside the dataset folder {dataset_dir}; refusing to use it")
    return path


@dataclass
class FormatEntry:
    name: str
    directory: str
    options: dict
    files: list[FileEntry]
    write_seconds: float
    checksum_seconds: float
    created: str

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    @property
    def write_mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.write_seconds if self.write_seconds > 0 else float("nan")

    def to_json(self) -> dict:
        return {
            "directory": self.directory,
            "options": self.options,
            "files": [vars(f) for f in self.files],
            "bytes": self.bytes,
            "write_seconds": round(self.write_seconds, 4),
            "write_mb_per_s": round(self.write_mb_per_s, 2),
            "checksum_seconds": round(self.checksum_seconds, 4),
            "created": self.created,
        }

    def folder(self, dataset_dir: Path) -> Path:
        return inside(dataset_dir, self.directory)

    def file_paths(self, dataset_dir: Path) -> list[Path]:
        return [inside(dataset_dir, f"{self.directory}/{f.path}") for f in self.files]

    @classmethod
    def from_json(cls, name: str, d: dict) -> FormatEntry:
        files = [FileEntry(**f) for f in d["files"]]
        for f in files:
            _safe_relative(f.path, "file")
            if (
                not isinstance(f.bytes, int)
                or isinstance(f.bytes, bool)
                or f.bytes < 0
                or not isinstance(f.sha256, str)
            ):
                raise ValueError(f"file {f.path!r}: bytes and sha256 must be a whole number and a string")
        return cls(
            name=_safe_name(name, "format"),
            directory=_safe_name(d["directory"], "format directory"),
            options=_options(d.get("options", {})),
            files=files,
            write_seconds=float(d["write_seconds"]),
            checksum_seconds=float(d.get("checksum_seconds", 0.0)),
            created=d.get("created", ""),
        )


@dataclass
class Manifest:
    spec: DatasetSpec
    content: dict
    formats: dict[str, FormatEntry] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "iobench_manifest_version": MANIFEST_VERSION,
            "iobench_version": __version__,
            "spec": self.spec.to_json(),
            "payload_bytes": self.spec.payload_bytes,
            "content_checksum": self.content,
            "formats": {name: e.to_json() for name, e in self.formats.items()},
        }

    def save(self, dataset_dir: Path) -> None:
        atomic_write_json(dataset_dir / MANIFEST, self.to_json())

    @classmethod
    def load(cls, dataset_dir: Path) -> Manifest:
        path = dataset_dir / MANIFEST
        if not path.is_file():
            raise IobenchError(f"{dataset_dir}: not an iobench dataset (no {MANIFEST}); run `iobench prepare`")
        try:
            d = read_json(path, MAX_MANIFEST_BYTES)
            if d.get("iobench_manifest_version") != MANIFEST_VERSION:
                raise ValueError(f"unsupported manifest version {d.get('iobench_manifest_version')!r}")
            return cls(
                spec=DatasetSpec.from_json(d["spec"]),
                content=d["content_checksum"],
                formats={n: FormatEntry.from_json(n, e) for n, e in d["formats"].items()},
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise IobenchError(f"{path}: unreadable manifest ({exc})") from None


def find_datasets(data_dir: Path, dataset: str | None = None) -> list[Path]:
    """The dataset directories to act on: data_dir itself, data_dir/dataset, or all under data_dir."""
    if not data_dir.is_dir():
        raise IobenchError(f"{data_dir}: no such directory; run `iobench prepare --data-dir {data_dir}`")
    if dataset is not None:
        path = data_dir / dataset
        if not (path / MANIFEST).is_file():
            raise IobenchError(f"{path}: not an iobench dataset (no {MANIFEST})")
        return [path]
    if (data_dir / MANIFEST).is_file():
        return [data_dir]
    found = dataset_dirs(data_dir)
    if not found:
        raise IobenchError(f"{data_dir}: no prepared dataset here; run `iobench prepare --data-dir {data_dir}`")
    return found


def find_run_dataset(
    data_dir: Path, dataset: str | None = None, formats: tuple[str, ...] = (), skipped: list[str] | None = None
) -> Path | None:
    """The one dataset to measure; None when data_dir holds none yet (the caller may prepare one).

    Among several, the most recently prepared that has every format asked for (or, when none has them all, the
    most recently prepared): `prepare --from photos/` then `run` measures the photos, not the default dataset. One
    whose manifest cannot be read is left out of the choice, and named in `skipped`."""
    if dataset is not None or (data_dir / MANIFEST).is_file():
        return find_datasets(data_dir, dataset)[0]
    if not data_dir.is_dir():
        return None
    found = dataset_dirs(data_dir)
    if len(found) <= 1:
        return found[0] if found else None
    readable = {}
    for p in found:
        try:
            readable[p] = Manifest.load(p)
        except IobenchError as exc:
            if skipped is not None:
                skipped.append(str(exc))
    having = [p for p in readable if set(formats) <= set(readable[p].formats)] or list(readable)
    return max(having, key=prepared_at) if having else None


def prepared_at(dataset_dir: Path) -> float:
    """When a dataset was last prepared: its manifest's last write (prepare rewrites it for every format it adds)."""
    try:
        return (dataset_dir / MANIFEST).stat().st_mtime
    except OSError:
        return 0.0


def datasets_with(data_dir: Path, fmt: str) -> list[str]:
    """Names of the datasets beside data_dir/... that have the format (to point a user at one)."""
    if not data_dir.is_dir():
        return []
    return [p.name for p in dataset_dirs(data_dir) if fmt in _formats_of(p)]


def dataset_dirs(data_dir: Path) -> list[Path]:
    """The prepared datasets in data_dir, sorted; one a prepare is still building (a partial name) is not one."""
    return sorted(p for p in data_dir.iterdir() if not p.name.startswith(PARTIAL_PREFIX) and (p / MANIFEST).is_file())


def _formats_of(dataset_dir: Path) -> dict:
    try:
        return Manifest.load(dataset_dir).formats
    except IobenchError:
        return {}


def served_files(dataset_dirs_: list[Path]) -> list[str]:
    """What a server of these datasets' folder may hand out, relative to the folder that holds them: the files
    each readable manifest lists (its own manifest, other folders, `.partial-*` leftovers are not among them)."""
    names = []
    for folder in dataset_dirs_:
        try:
            manifest = Manifest.load(folder)
        except IobenchError:
            continue
        for entry in manifest.formats.values():
            names += [p.relative_to(folder.parent).as_posix() for p in entry.file_paths(folder)]
    return names
