"""`iobench prepare`: write the shared dataset into each format, durably and atomically."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import re
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobench.choices import parse_choices
from iobench.data.manifest import MANIFEST, Manifest
from iobench.data.writing import FormatJob, write_formats
from iobench.errors import IobenchError, one_line
from iobench.formats import FORMATS
from iobench.progress import NullReporter, Reporter
from iobench.spec import DatasetSpec
from iobench.system.fsutil import (
    PARTIAL_PREFIX,
    free_bytes,
    make_partial_dir,
    missing_folders,
    remove,
    remove_stale_partials,
    swap_in,
)
from iobench.system.processes import process_alive
from iobench.system.signals import signals_held

DISK_MARGIN = 1.05  # keep 5% of the estimate spare


@dataclass(frozen=True)
class WriteRequest:
    spec: DatasetSpec
    data_dir: Path
    formats: tuple[str, ...]
    options: dict[str, Any]  # format name -> that format's options dataclass
    dataset: str | None = None
    force: bool = False

    @classmethod
    def with_default_options(cls, spec: DatasetSpec, data_dir: Path, formats: tuple[str, ...]) -> WriteRequest:
        return cls(spec, data_dir, formats, {n: FORMATS[n].options() for n in formats})

    @property
    def dataset_dir(self) -> Path:
        return self.data_dir / (self.dataset or self.spec.name)


def options_of(names: list[str], given: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each format's write options from the values given for it (the rest its defaults)."""
    return {name: FORMATS[name].options(**given.get(name, {})) for name in names}


def parse_formats(text: str, skipped: list[str] | None = None, broken: list[str] | None = None) -> tuple[str, ...]:
    """'npy,hdf5' or 'all' -> names in registry order; unknown names are an error. With 'all' a format whose
    library is not installed is left out (its name goes to `skipped`), and so is a plug-in that cannot be loaded
    or named (its reason goes to `broken`); named, either is refused."""
    names = parse_choices(text, tuple(FORMATS), "format")
    every = "all" in [n.strip().lower() for n in text.split(",")]
    missing = [n for n in names if not FORMATS.installed(n)]
    if missing and not every:
        raise IobenchError(FORMATS.missing(missing[0]))
    failing = {n: why for n in names if n not in missing and (why := FORMATS.loads(n)) is not None}
    if failing and not every:
        raise IobenchError(next(iter(failing.values())))
    if skipped is not None:
        skipped.extend(missing)
    if broken is not None:
        broken.extend([*failing.values(), *(FORMATS.refused if every else [])])
    return tuple(n for n in FORMATS if n in names and n not in missing and n not in failing)


@dataclass
class PreparePlan:
    """A request that passed every check: what will be written where."""

    request: WriteRequest
    dataset_dir: Path
    manifest: Manifest
    estimated_bytes: int
    # What --force replaces when the dataset differs: the old dataset's folders (and its manifest). The new
    # one is then built beside it and swapped in whole once complete; the old one is removed after that.
    replaced: list[Path] = field(default_factory=list)
    created: bool = False  # the dataset folder is this prepare's: removed again if nothing lands in it
    made: tuple[Path, ...] = ()  # the folders this prepare made (the dataset's, its parents), deepest first


# A dataset's name becomes a bucket or a key prefix in object storage (`upload`, `run --remote`): plain characters
# that travel unencoded ('a b' made obstore panic, `x#y` and `q?z` asked for another object).
DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def check_dataset_name(name: str) -> None:
    if not DATASET_NAME.fullmatch(name):
        raise IobenchError(
            f"--dataset {name!r}: a dataset's name travels to object storage as it is; use at most 200 "
            "letters, digits, '.', '_' and '-', beginning with a letter or digit"
        )


def plan(request: WriteRequest) -> PreparePlan:
    """Every check that can fail before a byte is written: refuse early, leave nothing behind."""
    check_dataset_name(request.dataset_dir.name)
    _check_source_outside(request)
    resolved = {n: FORMATS[n].resolve_options(request.spec, request.options[n]) for n in request.formats}
    request = dataclasses.replace(request, options=resolved)  # a format's refusal of the spec comes first
    dataset_dir, made = _make_dataset_dir(request)
    created = bool(made)
    try:
        manifest, replaced = _existing_manifest(request, dataset_dir)
        existing = [n for n in request.formats if n in manifest.formats]
        if existing and not request.force:
            raise IobenchError(f"{dataset_dir}: {', '.join(existing)} already prepared; use --force to overwrite")
        need = _check_free_space(request, dataset_dir)
    except BaseException:
        remove_made(made)
        raise
    return PreparePlan(request, dataset_dir, manifest, need, replaced, created, tuple(made))


def prepare(request: WriteRequest | PreparePlan, reporter: Reporter | None = None) -> Manifest:
    """Write every requested format; returns the updated manifest."""
    p = request if isinstance(request, PreparePlan) else plan(request)
    with dataset_lock(p.dataset_dir):
        try:
            return _prepare_locked(p, reporter or NullReporter())
        except BaseException:
            if p.created and not p.manifest.formats:  # an empty dataset folder (and the data folder made) is none
                remove_made(list(p.made))
            raise


@contextlib.contextmanager
def dataset_lock(dataset_dir: Path) -> Iterator[None]:
    """One prepare per dataset at a time (an flock on the folder: released if the process dies)."""
    fd = os.open(dataset_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IobenchError(f"{dataset_dir}: another prepare is running on this dataset; wait for it") from None
        yield
    finally:
        os.close(fd)


def _prepare_locked(p: PreparePlan, reporter: Reporter) -> Manifest:
    dataset_dir = p.dataset_dir
    remove_stale_partials(dataset_dir)
    remove_stale_staging(dataset_dir.parent)
    if not p.replaced:
        return _write_into(dataset_dir, p.manifest, p.request, reporter, kept="nothing was kept")
    # --force over another dataset: the new one is built beside it and swapped in whole once complete, so a
    # failure or an interrupt at any moment before leaves the old one as it was
    staging = make_partial_dir(dataset_dir.parent, f"{STAGING}{os.getpid()}")
    try:
        manifest = _write_into(staging, p.manifest, p.request, reporter, kept=f"{dataset_dir.name} is unchanged")
    except BaseException:
        remove(staging)
        raise
    old = None
    try:
        with signals_held():  # an interrupt lands before the swap or after it, never inside
            old = swap_in(staging, dataset_dir)
    finally:
        if old is not None:
            remove(old)
    return manifest


def _write_into(
    dataset_dir: Path, manifest: Manifest, request: WriteRequest, reporter: Reporter, kept: str
) -> Manifest:
    """Write the formats into partial folders of dataset_dir and rename each into place once complete;
    `kept` ends the line of a failure (what is left as it was)."""
    if not (dataset_dir / MANIFEST).is_file():
        # The manifest exists before any format folder does: an interrupt at any later moment leaves
        # a dataset folder that the next prepare recognises (and a format only counts once listed).
        manifest.save(dataset_dir)
    try:
        jobs, content = write_formats(
            request.spec, dataset_dir, {n: request.options[n] for n in request.formats}, reporter
        )
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise IobenchError(f"disk full while writing {request.dataset_dir} ({exc.strerror}); {kept}") from None
        raise IobenchError(f"writing {request.dataset_dir} failed: {exc.strerror or exc}; {kept}") from None
    except RuntimeError as exc:  # a writer thread or process reported its failure
        raise IobenchError(f"writing {request.dataset_dir} failed: {one_line(exc)}; {kept}") from None
    except IobenchError:
        raise
    except Exception as exc:
        if request.spec.source is None:
            raise  # generated data: a bug, with its traceback
        # The source changed or is damaged beyond what opening it checked (a truncated JPEG, a short
        # archive member, a bad CRC): its reader's verdict, naming the sample where it can.
        raise IobenchError(
            f"--from {request.spec.source.path}: {type(exc).__name__}: {one_line(exc)}; {kept}"
        ) from None
    if manifest.content and manifest.content != content:
        # Every format is written from the same generator: a differing digest is a bug.
        raise IobenchError(f"{request.dataset_dir}: generated content differs from the manifest's checksum")
    manifest.content = content
    try:
        for job in jobs:
            with signals_held():  # an interrupt waits for the format to be listed or left as it was
                _list(dataset_dir, manifest, job)
    except OSError as exc:
        full = "disk full" if exc.errno == errno.ENOSPC else "failed"
        raise IobenchError(
            f"listing a format in {request.dataset_dir} {full} ({exc.strerror or exc}); {kept}"
        ) from None
    finally:
        for job in jobs:
            shutil.rmtree(job.partial, ignore_errors=True)
    return manifest


def _list(dataset_dir: Path, manifest: Manifest, job: FormatJob) -> None:
    """Move a written format into place and list it. A manifest that cannot be saved (a full disk) leaves
    the format as it was: the new folder goes, an old one (--force) comes back with its entry."""
    final = dataset_dir / job.name
    old_entry = manifest.formats.pop(job.name, None)
    if old_entry is not None:  # --force: the old entry must not vouch for new files
        try:
            manifest.save(dataset_dir)
        except OSError:
            manifest.formats[job.name] = old_entry  # nothing changed on disk
            raise
    if final.exists():
        old = swap_in(job.partial, final)
    else:
        os.replace(job.partial, final)
        old = None
    manifest.formats[job.name] = job.entry
    try:
        manifest.save(dataset_dir)
    except OSError:
        del manifest.formats[job.name]
        remove(swap_in(old, final) if old is not None else final)
        if old_entry is not None:
            manifest.formats[job.name] = old_entry
            with contextlib.suppress(OSError):  # still full: the old folder stays, unlisted, for --force
                manifest.save(dataset_dir)
        raise
    if old is not None:
        remove(old)


STAGING = "dataset-"  # `.partial-dataset-<pid>-…`: a dataset being built beside the one it replaces


def remove_stale_staging(data_dir: Path) -> None:
    """Datasets a killed `prepare --force` was building beside the old one (and old ones it was about to
    remove), once their process is gone; a running prepare's are left alone."""
    for path in data_dir.glob(f"{PARTIAL_PREFIX}{STAGING}*") if data_dir.is_dir() else []:
        pid = path.name.removeprefix(f"{PARTIAL_PREFIX}{STAGING}").split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            remove(path)


def _check_source_outside(request: WriteRequest) -> None:
    """A source inside the dataset it would write is refused before anything is touched: --force
    would delete it (and the rest of the dataset) before reading it. Real paths, links resolved."""
    source = request.spec.source
    if source is None:
        return
    paths = [source.path]
    if source.labels and source.kind in ("npy", "hdf5"):  # a path; the other kinds name a key
        paths.append(source.labels.rpartition(":")[0] if source.kind == "hdf5" else source.labels)
    dataset = request.dataset_dir.resolve()
    for path in paths:
        if Path(path).resolve().is_relative_to(dataset):
            raise IobenchError(
                f"--from {path}: it lies inside the dataset being written ({dataset}); "
                "copy it elsewhere or choose another --dataset"
            )


def check_dataset_folder(folder: Path) -> None:
    """A dataset's folder that iobench writes or measures, checked as --dir is: where it exists, a folder of this
    user's, never a link (feed's dataset name is predictable: a link planted at `data/feed-custom-3000` to another
    user's folder had root write its manifest there and measure what that user could change)."""
    try:
        st = os.lstat(folder)
    except (FileNotFoundError, NotADirectoryError):  # missing, or below a file: making it says so
        return
    except OSError as exc:
        raise IobenchError(f"{folder}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise IobenchError(
            f"{folder} is a link; give --data-dir the folder it points to (a dataset is never used through a link)"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise IobenchError(f"{folder} is not a folder")
    if st.st_uid != os.geteuid():
        raise IobenchError(f"{folder} belongs to uid {st.st_uid}, not to you; prepare a dataset of your own")


def _make_dataset_dir(request: WriteRequest) -> tuple[Path, list[Path]]:
    """The dataset's folder, made if missing; the folders made (its missing parents and itself, deepest first), which
    a refusal removes again."""
    dataset_dir = request.dataset_dir
    check_dataset_folder(dataset_dir)
    missing = missing_folders(dataset_dir)
    try:
        dataset_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IobenchError(f"cannot create {dataset_dir}: {exc.strerror or exc}") from None
    if not os.access(dataset_dir, os.W_OK | os.X_OK):
        raise IobenchError(f"{dataset_dir}: not writable")
    return dataset_dir, missing


def remove_made(folders: list[Path]) -> None:
    """Folders a refused or failed prepare made, deepest first: the dataset's whole, its parents only while empty."""
    for i, path in enumerate(folders):
        with contextlib.suppress(OSError):
            if i == 0:
                shutil.rmtree(path)
            else:
                path.rmdir()


def _existing_manifest(request: WriteRequest, dataset_dir: Path) -> tuple[Manifest, list[Path]]:
    """The manifest to extend, and what --force will remove first (nothing is removed here)."""
    fresh = Manifest(spec=request.spec, content={})
    if not (dataset_dir / MANIFEST).exists():
        strays = [p for p in dataset_dir.iterdir() if not p.name.startswith(PARTIAL_PREFIX)]
        # Format folders without a manifest: what an interrupted prepare of an older iobench left.
        leftovers = all(p.name in FORMATS and p.is_dir() and not p.is_symlink() for p in strays)
        if strays and not (leftovers and request.force):
            hint = "use --force to replace them" if leftovers else "choose another --data-dir or --dataset"
            raise IobenchError(
                f"{dataset_dir}: exists and is not an iobench dataset (holds {strays[0].name!r}); {hint}"
            )
        return fresh, strays
    manifest = Manifest.load(dataset_dir)
    if manifest.spec == request.spec:
        return manifest, []
    if not request.force:
        raise IobenchError(
            f"{dataset_dir}: holds a different dataset ({manifest.spec.name}); "
            "use --force to replace it or choose another --dataset"
        )
    return fresh, [*(entry.folder(dataset_dir) for entry in manifest.formats.values()), dataset_dir / MANIFEST]


def _check_free_space(request: WriteRequest, dataset_dir: Path) -> int:
    """The new formats must fit beside what they replace: the old files stay until the new ones are complete."""
    need = int(DISK_MARGIN * sum(FORMATS[n].estimate_bytes(request.spec, request.options[n]) for n in request.formats))
    free = free_bytes(dataset_dir)
    if need > free:
        kept = " beside the old dataset, which stays until the new one is complete" if request.force else ""
        raise IobenchError(
            f"not enough disk space in {dataset_dir}: need about {need / 1e9:.2f} GB{kept}, {free / 1e9:.2f} GB free"
        )
    return need
