"""`iobench upload`: a prepared dataset's formats put into an S3-compatible store, as `run --endpoint-url` reads them:
every file the manifest lists checked first (a regular file of its size), hashed as it is sent against the manifest,
and what was sent removed again if the upload does not finish."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobench.errors import IobenchError, reason
from iobench.events import Events


@dataclass(frozen=True)
class UploadRequest:
    endpoint_url: str  # http(s)://host:port/bucket: the store, and the bucket where the path names one
    data_dir: Path
    dataset: str | None = None  # the only one under data_dir where None
    formats: str | None = None  # a comma list; every prepared format where None


@dataclass(frozen=True)
class UploadOutcome:
    bucket: str
    sent_bytes: int


def upload_session(request: UploadRequest, events: Events) -> UploadOutcome:
    """Each named format (every prepared one by default) of the dataset under `data_dir` put into the store."""
    endpoint_url, data_dir, dataset, formats = request.endpoint_url, request.data_dir, request.dataset, request.formats
    from iobench.data.manifest import Manifest, find_run_dataset
    from iobench.data.prepare import check_dataset_name
    from iobench.storage.remote import ObjectStorage, RemoteTarget
    from iobench.storage.remote.endpoint import store_at

    if dataset is not None:  # before a path is made of it (300 characters: "File name too long")
        check_dataset_name(dataset)
    folder = find_run_dataset(data_dir, dataset)
    if folder is None:
        raise IobenchError(f"no prepared dataset in {data_dir}; run `iobench prepare` first")
    check_dataset_name(folder.name)  # it becomes a bucket or a key prefix: prepare and run refuse the same names
    endpoint = store_at(endpoint_url)
    manifest = Manifest.load(folder)
    names = list(manifest.formats) if formats is None else [f for f in formats.split(",") if f]
    if missing := [f for f in names if f not in manifest.formats]:
        raise IobenchError(f"{folder.name} has no {', '.join(missing)} (prepared: {', '.join(manifest.formats)})")
    bucket, keyed = endpoint.bucket_for(folder.name), endpoint.prefix_for(folder.name)
    ObjectStorage(RemoteTarget(endpoint, None), bucket, "", []).check_bucket()
    entries = [manifest.formats[name] for name in names]
    for entry in entries:  # every file checked before any is sent: a missing or truncated one sends nothing
        for f, path in zip(entry.files, entry.file_paths(folder), strict=True):
            check_sendable(path, f.bytes)
    total = 0
    done: list[tuple[Any, str]] = []  # (storage, name) of every object sent, every format: removed if one fails
    try:
        for entry in entries:
            root = entry.folder(folder)
            prefix = keyed + root.relative_to(folder).as_posix()
            storage = ObjectStorage(RemoteTarget(endpoint, None), bucket, prefix, [])
            files = [(f, path) for f, path in zip(entry.files, entry.file_paths(folder), strict=True)]
            sent = put_files(storage, root, files, done)
            total += sent
            events.say(
                f"{entry.name}: {len(entry.files)} file(s), {sent / 1e6:,.1f} MB to s3://{bucket}/{storage.prefix}/"
            )
    except IobenchError as exc:
        raise IobenchError(f"{exc}{_remove_sent(done)}") from None
    except BaseException:  # interrupted: the generic line says nothing half-written was kept, which must be true
        if left := _remove_sent(done):
            events.say(f"upload interrupted{left}")
        raise
    return UploadOutcome(bucket, total)


def check_sendable(path: Path, size: int) -> None:
    """A regular file (no link, FIFO or folder) of the manifest's size, or one line naming it."""
    from iobench.system.fsutil import open_regular

    try:
        fd = open_regular(path)
    except OSError as exc:
        raise IobenchError(f"{path}: {exc.strerror or exc}; `iobench verify` checks the dataset") from None
    try:
        found = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if found != size:
        raise IobenchError(
            f"{path} holds {found:,} bytes, not the {size:,} its manifest lists; `iobench verify` checks the dataset"
        )


class _Hashed:
    """A file read for sending in blocks (what obstore's put takes: an iterable of bytes), SHA-256 hashed on the
    way."""

    BLOCK = 8 * 2**20

    def __init__(self, f: Any) -> None:
        import hashlib

        self.f, self.hash = f, hashlib.sha256()

    def __iter__(self) -> Any:
        while data := self.f.read(self.BLOCK):
            self.hash.update(data)
            yield data


def put_files(storage: Any, root: Path, files: list[tuple[Any, Path]], done: list[tuple[Any, str]]) -> int:
    """Each file (opened as a regular file, never through a link) under the storage's prefix, checked against its
    manifest entry as it is sent (added to `done` once in the store, for the caller to remove if the upload does not
    finish); bytes sent."""
    import obstore

    from iobench.storage.remote.client_errors import obstore_reason
    from iobench.system.fsutil import open_regular

    sent = 0
    for entry, path in files:
        name = path.relative_to(root).as_posix()
        with open(open_regular(path), "rb") as f:
            hashed = _Hashed(f)
            try:
                obstore.put(storage.store(), storage.key(name), hashed)
            except Exception as exc:  # obstore's exception classes vary by release: one line
                said = obstore_reason(exc) or reason(exc)
                raise IobenchError(f"upload of {name} to {storage.url(name)} failed: {said}") from None
            done.append((storage, name))
            if hashed.hash.hexdigest() != entry.sha256:
                raise IobenchError(
                    f"{path} changed since it was prepared (its SHA-256 is not the manifest's); "
                    "`iobench verify` checks the dataset"
                )
            sent += os.fstat(f.fileno()).st_size
    return sent


def _remove_sent(done: list[tuple[Any, str]]) -> str:
    """Delete what an upload that did not finish had sent, every format of it (a bucket left with a format but not
    the next would be read as that dataset); what to add to its line ("" when nothing had been sent)."""
    import obstore

    left, places = [], []
    for storage, name in done:
        where = f"s3://{storage.bucket}/{storage.prefix}/"
        if where not in places:
            places.append(where)
        try:
            obstore.delete(storage.store(), storage.key(name))
        except Exception:  # said in the line
            left.append(f"{where}{name}")
    if not done:
        return ""
    if left:
        return f"; {len(left)} object(s) it had sent stay: {', '.join(left[:5])}"
    return f"; the {len(done)} object(s) it had sent to {', '.join(places)} were removed"
