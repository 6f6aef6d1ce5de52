"""`iobench verify`: read every format back completely and compare with the manifest."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from iobench.data.dataset import ContentHasher
from iobench.data.manifest import MANIFEST, FormatEntry, Manifest
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.progress import NullReporter, Reporter
from iobench.system.fsutil import PARTIAL_PREFIX, probe_owner, sha256_file


@dataclass
class FormatCheck:
    name: str
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_dataset(dataset_dir: Path, reporter: Reporter | None = None) -> tuple[list[FormatCheck], list[str]]:
    """Checks per format, plus warnings about the directory (leftovers, unlisted formats)."""
    reporter = reporter or NullReporter()
    manifest = Manifest.load(dataset_dir)
    checks = [verify_format(dataset_dir, manifest, entry, reporter) for entry in manifest.formats.values()]
    listed = {e.directory for e in manifest.formats.values()} | {MANIFEST}
    warnings = []
    for p in sorted(dataset_dir.iterdir()):
        if probe_owner(p.name) is not None:
            warnings.append(
                f"{p.name}: probe file of an interrupted `iobench limits` or `doctor` (the next removes it)"
            )
        elif p.name.startswith(PARTIAL_PREFIX):
            warnings.append(f"{p.name}: left by an interrupted prepare (the next prepare removes it)")
        elif p.name not in listed:
            warnings.append(f"{p.name}: not in the manifest (not a prepared format)")
    return checks, warnings


def verify_format(dataset_dir: Path, manifest: Manifest, entry: FormatEntry, reporter: Reporter) -> FormatCheck:
    check = FormatCheck(entry.name)
    t0 = time.perf_counter()
    if entry.name not in FORMATS:
        check.problems.append(f"unknown format {entry.name!r} in the manifest")
        return check
    try:
        directory = entry.folder(dataset_dir)
        paths = entry.file_paths(dataset_dir)
    except IobenchError as exc:
        check.problems.append(str(exc))
        return check
    if not directory.is_dir():
        check.problems.append(f"directory {directory} is missing")
        return check
    if _check_files(paths, entry, check, reporter):
        _check_content(directory, manifest, entry, check, reporter)
    else:  # never map a file of the wrong size (a truncated mapping faults on access, or grows the file)
        check.problems.append("content not decoded: files are missing or of the wrong size")
    check.seconds = time.perf_counter() - t0
    return check


def _check_files(paths: list[Path], entry: FormatEntry, check: FormatCheck, reporter: Reporter) -> bool:
    """Sizes and checksums against the manifest; True when every file has the size it should."""
    sizes_ok = True
    key = f"{entry.name}:files"
    reporter.start(key, f"{entry.name} file checksums", entry.bytes)
    for f, path in zip(entry.files, paths, strict=True):
        if not path.is_file():
            check.problems.append(f"{f.path}: missing")
            sizes_ok = False
            continue
        size = path.stat().st_size
        if size != f.bytes:
            check.problems.append(f"{f.path}: {size} bytes, manifest says {f.bytes}")
            sizes_ok = False
            continue
        if sha256_file(path, lambda n: reporter.advance(key, n)) != f.sha256:
            check.problems.append(f"{f.path}: checksum mismatch")
    return sizes_ok


def _check_content(
    directory: Path, manifest: Manifest, entry: FormatEntry, check: FormatCheck, reporter: Reporter
) -> None:
    """Decode everything through the format's reader: proves the reader returns the dataset."""
    fmt = FORMATS[entry.name]
    spec = manifest.spec
    key = f"{entry.name}:content"
    reporter.start(key, f"{entry.name} content", spec.payload_bytes)
    hasher = ContentHasher()
    try:
        options = fmt.verify_options(fmt.options_from_json(entry.options))
        with fmt.reader(directory, spec, options) as reader:
            for start in range(0, spec.n_samples, spec.chunk_rows):
                stop = min(start + spec.chunk_rows, spec.n_samples)
                features, labels = reader.read_range(start, stop)
                if features.shape != (stop - start, *spec.shape) or labels.shape != (stop - start,):
                    raise ValueError(f"samples {start}..{stop} came back with shape {features.shape}")
                hasher.update(features.astype(spec.np_dtype, copy=False), labels)
                reporter.advance(key, (stop - start) * spec.sample_bytes)
    except Exception as exc:  # any decoding failure is a verdict about the data, not a crash
        check.problems.append(f"cannot read: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return
    if hasher.digest() != manifest.content:
        check.problems.append("content checksum mismatch (the data read back differs)")
