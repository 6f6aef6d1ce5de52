"""`iobench serve`: the data folder as S3 on loopback behind the network shaper, until Ctrl-C, for pointing
one's own pipeline (boto3, s3fs, LitData, ...) at the same endpoint and profile that `run --remote` reads."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.console import out, say
from iobench.errors import IobenchError, reason


@app.command("serve")
def serve_cmd(
    profile: o.ServeProfile = "s3-like",
    data_dir: o.DataDir = Path("data"),
    latency_ms: o.ServeLatencyMs = None,
    connection_mb_per_s: o.ServeConnectionMbPerS = None,
) -> None:
    """Serve --data-dir as S3 on 127.0.0.1 (rclone serve s3, read-only; each prepared dataset a bucket of its name,
    holding the files its manifest lists) behind nginx shaping every request to the profile; prints the endpoint,
    keys, the variables AWS SDKs read and each dataset's `--endpoint-url`. Ctrl-C or SIGTERM stops it."""
    from iobench.data.manifest import dataset_dirs, served_files
    from iobench.storage.remote.emulator import Emulator
    from iobench.storage.remote.profiles import profile as named

    chosen = named(profile, latency_ms, connection_mb_per_s)
    if not data_dir.is_dir():
        raise IobenchError(f"--data-dir {data_dir} is not a folder")
    datasets = dataset_dirs(data_dir)
    # A shell starts a background job with SIGINT ignored, and Python then leaves it so: serve said "Ctrl-C stops
    # it" and ignored it. Both signals end it here, whatever it inherited.
    signal.signal(signal.SIGINT, _stop)
    with Emulator(data_dir, chosen, served=served_files(datasets)) as endpoint:
        buckets = [p.name for p in datasets]
        say(f"serving {data_dir.resolve()} as S3 at {endpoint.url}, {chosen.describe()}; Ctrl-C stops it")
        for name, value in endpoint.environment().items():
            out.print(f"export {name}={value}", highlight=False, soft_wrap=True, markup=False)
        out.print(f"# buckets: {', '.join(buckets) or 'none'}", highlight=False, soft_wrap=True, markup=False)
        for bucket in buckets:
            out.print(f"# iobench run --endpoint-url {endpoint.url}/{bucket} --dataset {bucket}", highlight=False,
                      soft_wrap=True, markup=False)  # fmt: skip
        signal.pause()  # until a signal ends the command (Ctrl-C, SIGTERM); the emulator stops on the way out


@app.command("upload")
def upload_cmd(
    endpoint_url: o.UploadEndpoint,
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    formats: o.UploadFormats = None,
) -> None:
    """Put a prepared dataset's formats into an S3-compatible store (keys from AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY): the bucket the URL's path names (http(s)://host:port/bucket), else the dataset's
    name; it must exist. Each format's files go under its name (under the dataset's name too, in a bucket the URL
    names: two datasets share it), as `run --endpoint-url` reads them. Only the files
    the manifest lists are sent, each checked inside its folder, a regular file of the manifest's size and content
    (hashed as it is sent); an upload interrupted or refused removes what it had sent."""
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
    done: list[tuple[Any, str]] = []  # (storage, name) of every object sent, every format: removed if one fails
    try:
        for entry in entries:
            root = entry.folder(folder)
            prefix = keyed + root.relative_to(folder).as_posix()
            storage = ObjectStorage(RemoteTarget(endpoint, None), bucket, prefix, [])
            files = [(f, path) for f, path in zip(entry.files, entry.file_paths(folder), strict=True)]
            sent = put_files(storage, root, files, done)
            say(f"{entry.name}: {len(entry.files)} file(s), {sent / 1e6:,.1f} MB to s3://{bucket}/{storage.prefix}/")
    except IobenchError as exc:
        raise IobenchError(f"{exc}{_remove_sent(done)}") from None
    except BaseException:  # interrupted: the generic line says nothing half-written was kept, which must be true
        if left := _remove_sent(done):
            say(f"upload interrupted{left}")
        raise


def _stop(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


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
        raise IobenchError(f"{path} holds {found:,} bytes, not the {size:,} its manifest lists; `iobench verify` "
                           "checks the dataset")  # fmt: skip


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

    from iobench.storage.remote.emulator import obstore_reason
    from iobench.system.fsutil import open_regular

    sent = 0
    for entry, path in files:
        name = path.relative_to(root).as_posix()
        with open(open_regular(path), "rb") as f:
            hashed = _Hashed(f)
            try:
                obstore.put(storage.store(), storage.key(name), hashed)
            except Exception as exc:  # noqa: BLE001 - obstore's exception classes vary by release: one line
                said = obstore_reason(exc) or reason(exc)
                raise IobenchError(f"upload of {name} to {storage.url(name)} failed: {said}") from None
            done.append((storage, name))
            if hashed.hash.hexdigest() != entry.sha256:
                raise IobenchError(f"{path} changed since it was prepared (its SHA-256 is not the manifest's); "
                                   "`iobench verify` checks the dataset")  # fmt: skip
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
        except Exception:  # noqa: BLE001 - said in the line
            left.append(f"{where}{name}")
    if not done:
        return ""
    if left:
        return f"; {len(left)} object(s) it had sent stay: {', '.join(left[:5])}"
    return f"; the {len(done)} object(s) it had sent to {', '.join(places)} were removed"
