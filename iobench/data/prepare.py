"""`iobench prepare`: write the shared dataset into each format, durably and atomically."""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobench.choices import parse_choices
from iobench.data.dataset import DatasetSpec
from iobench.data.manifest import MANIFEST, Manifest
from iobench.data.writing import write_formats
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.fsutil import (
    PARTIAL_PREFIX,
    free_bytes,
    remove_stale_partials,
    replace_dir,
)
from iobench.progress import NullReporter, Reporter

DISK_MARGIN = 1.05  # keep 5% of the estimate spare


@dataclass(frozen=True)
class PrepareRequest:
    spec: DatasetSpec
    data_dir: Path
    formats: tuple[str, ...]
    options: dict[str, Any]  # format name -> that format's options dataclass
    dataset: str | None = None
    force: bool = False

    @classmethod
    def with_default_options(cls, spec: DatasetSpec, data_dir: Path, formats: tuple[str, ...]) -> PrepareRequest:
        return cls(spec, data_dir, formats, {n: FORMATS[n].options() for n in formats})

    @property
    def dataset_dir(self) -> Path:
        return self.data_dir / (self.dataset or self.spec.name)


def parse_formats(text: str) -> tuple[str, ...]:
    """'npy,hdf5' or 'all' -> names in registry order; unknown names are an error."""
    names = parse_choices(text, tuple(FORMATS), "format")
    return tuple(n for n in FORMATS if n in names)


@dataclass
class PreparePlan:
    """A request that passed every check: what will be written where."""

    request: PrepareRequest
    dataset_dir: Path
    manifest: Manifest
    estimated_bytes: int


def plan(request: PrepareRequest) -> PreparePlan:
    """Every check that can fail before a byte is written: refuse early, leave nothing behind."""
    created = not request.dataset_dir.exists()
    dataset_dir = _make_dataset_dir(request)
    try:
        manifest = _existing_manifest(request, dataset_dir)
        existing = [n for n in request.formats if n in manifest.formats]
        if existing and not request.force:
            raise IobenchError(f"{dataset_dir}: {', '.join(existing)} already prepared; use --force to overwrite")
        need = _check_free_space(request, dataset_dir)
    except BaseException:
        if created:
            shutil.rmtree(dataset_dir, ignore_errors=True)
        raise
    return PreparePlan(request, dataset_dir, manifest, need)


def prepare(request: PrepareRequest | PreparePlan, reporter: Reporter | None = None) -> Manifest:
    """Write every requested format; returns the updated manifest."""
    p = request if isinstance(request, PreparePlan) else plan(request)
    reporter = reporter or NullReporter()
    dataset_dir, manifest = p.dataset_dir, p.manifest
    remove_stale_partials(dataset_dir)
    request = p.request
    try:
        jobs, content = write_formats(
            request.spec, dataset_dir, {n: request.options[n] for n in request.formats}, reporter
        )
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise IobenchError(f"disk full while writing {dataset_dir}; nothing was kept") from None
        raise
    if manifest.content and manifest.content != content:
        # Every format is written from the same generator: a differing digest is a bug.
        raise IobenchError(f"{dataset_dir}: generated content differs from the manifest's checksum")
    manifest.content = content
    try:
        for job in jobs:
            if job.name in manifest.formats:  # --force: the old entry must not vouch for new files
                del manifest.formats[job.name]
                manifest.save(dataset_dir)
            replace_dir(job.partial, dataset_dir / job.name)
            manifest.formats[job.name] = job.entry
            manifest.save(dataset_dir)
    finally:
        for job in jobs:
            shutil.rmtree(job.partial, ignore_errors=True)
    return manifest


def _make_dataset_dir(request: PrepareRequest) -> Path:
    dataset_dir = request.dataset_dir
    try:
        dataset_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IobenchError(f"cannot create {dataset_dir}: {exc.strerror or exc}") from None
    if not os.access(dataset_dir, os.W_OK | os.X_OK):
        raise IobenchError(f"{dataset_dir}: not writable")
    return dataset_dir


def _existing_manifest(request: PrepareRequest, dataset_dir: Path) -> Manifest:
    fresh = Manifest(spec=request.spec, content={})
    if not (dataset_dir / MANIFEST).exists():
        strays = [p.name for p in dataset_dir.iterdir() if not p.name.startswith(PARTIAL_PREFIX)]
        if strays:
            raise IobenchError(
                f"{dataset_dir}: exists and is not an iobench dataset (holds {strays[0]!r}); "
                "choose another --data-dir or --dataset"
            )
        return fresh
    manifest = Manifest.load(dataset_dir)
    if manifest.spec == request.spec:
        return manifest
    if not request.force:
        raise IobenchError(
            f"{dataset_dir}: holds a different dataset ({manifest.spec.name}); "
            "use --force to replace it or choose another --dataset"
        )
    for entry in manifest.formats.values():
        shutil.rmtree(entry.folder(dataset_dir), ignore_errors=True)
    (dataset_dir / MANIFEST).unlink()
    return fresh


def _check_free_space(request: PrepareRequest, dataset_dir: Path) -> int:
    need = int(DISK_MARGIN * sum(FORMATS[n].estimate_bytes(request.spec, request.options[n]) for n in request.formats))
    free = free_bytes(dataset_dir)
    if need > free:
        raise IobenchError(
            f"not enough disk space in {dataset_dir}: need about {need / 1e9:.2f} GB, {free / 1e9:.2f} GB free"
        )
    return need
