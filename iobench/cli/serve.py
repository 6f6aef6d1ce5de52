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
    latency_ms: o.LatencyMs = None,
    connection_mb_per_s: o.ConnectionMbPerS = None,
) -> None:
    """Serve --data-dir as S3 on 127.0.0.1 (rclone serve s3, read-only; each dataset a bucket) behind nginx
    shaping every request to the profile; prints the endpoint, keys and the variables AWS SDKs read."""
    from iobench.data.manifest import dataset_dirs, served_files
    from iobench.storage.remote.emulator import Emulator
    from iobench.storage.remote.profiles import profile as named

    chosen = named(profile, latency_ms, connection_mb_per_s)
    if not data_dir.is_dir():
        raise IobenchError(f"--data-dir {data_dir} is not a folder")
    datasets = dataset_dirs(data_dir)
    with Emulator(data_dir, chosen, served=served_files(datasets)) as endpoint:
        buckets = [p.name for p in datasets]
        say(f"serving {data_dir.resolve()} as S3 at {endpoint.url}, {chosen.describe()}; Ctrl-C stops it")
        for name, value in endpoint.environment().items():
            out.print(f"export {name}={value}", highlight=False, soft_wrap=True, markup=False)
        out.print(f"# buckets: {', '.join(buckets) or 'none'}", highlight=False, soft_wrap=True, markup=False)
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
    name; it must exist. Each format's files go under its name, as `run --endpoint-url` reads them. Only the files
    the manifest lists are sent, each checked inside its folder."""
    from iobench.data.manifest import Manifest, find_run_dataset
    from iobench.storage.remote import ObjectStorage, RemoteTarget
    from iobench.storage.remote.endpoint import store_at

    endpoint = store_at(endpoint_url)
    folder = find_run_dataset(data_dir, dataset)
    if folder is None:
        raise IobenchError(f"no prepared dataset in {data_dir}; run `iobench prepare` first")
    manifest = Manifest.load(folder)
    names = list(manifest.formats) if formats is None else [f for f in formats.split(",") if f]
    if missing := [f for f in names if f not in manifest.formats]:
        raise IobenchError(f"{folder.name} has no {', '.join(missing)} (prepared: {', '.join(manifest.formats)})")
    bucket = endpoint.bucket_for(folder.name)
    ObjectStorage(RemoteTarget(endpoint, None), bucket, "", []).check_bucket()
    for name in names:
        entry = manifest.formats[name]
        root = entry.folder(folder)
        storage = ObjectStorage(RemoteTarget(endpoint, None), bucket, root.relative_to(folder).as_posix(), [])
        sent = put_files(storage, root, entry.file_paths(folder))
        say(f"{name}: {len(entry.files)} file(s), {sent / 1e6:,.1f} MB to s3://{bucket}/{storage.prefix}/")


def put_files(storage: Any, root: Path, paths: list[Path]) -> int:
    """Each file (opened as a regular file, never through a link) under the storage's prefix; bytes sent."""
    import obstore

    from iobench.storage.remote.emulator import obstore_reason
    from iobench.system.fsutil import open_regular

    sent = 0
    for path in paths:
        name = path.relative_to(root).as_posix()
        with open(open_regular(path), "rb") as f:
            try:
                obstore.put(storage.store(), storage.key(name), f)
            except Exception as exc:  # noqa: BLE001 - obstore's exception classes vary by release: one line
                said = obstore_reason(exc) or reason(exc)
                raise IobenchError(f"upload of {name} to {storage.url(name)} failed: {said}") from None
            sent += os.fstat(f.fileno()).st_size
    return sent
