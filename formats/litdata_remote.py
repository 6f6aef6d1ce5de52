"""What litdata's reading rests on, shared by the local reader and the remote path: the rules an `index.json` must
meet before LitData opens it (never its `pickle` serializer), and the dataset in object storage opened as its users
open it there, `StreamingDataset("s3://bucket/prefix", storage_options=..., cache_dir=...)`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from iobench.spec import DatasetSpec
from iobench.system.fsutil import parse_json, read_json

INDEX = "index.json"
CHUNK_NAME = re.compile(r"chunk-\d+-\d+\.bin")
FIELDS = ["features", "label", "index"]
TREE = [
    1,
    {
        "type": "builtins.dict",
        "context": json.dumps(FIELDS),
        "children_spec": [{"type": None, "context": None, "children_spec": []}] * 3,
    },
]


def open_remote(
    storage: Any, spec: DatasetSpec, cache: Path, shuffle: bool = False, seed: int = 42, **options: Any
) -> Any:
    """The StreamingDataset its users open on an S3 URL (`storage_options` naming the endpoint and keys, a local
    `cache_dir`), its index checked as a local one is before any item is read: LitData fetches `index.json` into
    the cache as it is made and reads chunks only when iterated (no request of iobench's own)."""
    from litdata import StreamingDataset

    from iobench.storage.remote.bounds import bounded_s3transfer

    endpoint = storage.target.endpoint
    if endpoint.url.startswith("http://"):
        _chunks_through_boto3()
    bounded_s3transfer()
    quiet_crash_reports()
    s3 = {
        "endpoint_url": endpoint.url,
        "aws_access_key_id": endpoint.access_key,
        "aws_secret_access_key": endpoint.secret_key,
        "region_name": endpoint.region,
    }
    s3["config"] = client_config(options.pop("max_pool_connections", None))
    url = f"s3://{storage.bucket}/{storage.prefix}" if storage.prefix else f"s3://{storage.bucket}"
    # LitData makes its client from `boto3.Session(**session_options)`: through a botocore session of iobench's, its
    # requests are counted and its answers held to the manifest's sizes, as the clients iobench makes are
    from iobench.storage.remote.client_counts import FreshSessions
    from iobench.system.private import library_temp

    with library_temp("litdata-tmp"):  # it fetches the index into a TemporaryDirectory first
        ds = StreamingDataset(
            url,
            cache_dir=str(cache),
            shuffle=shuffle,
            seed=seed,
            storage_options=s3,
            session_options=FreshSessions(storage.bound),
            **options,
        )
    try:
        check_fetched_index(cache, storage.url(INDEX), spec)
    except BaseException:
        release(ds)
        raise
    return ds


def client_config(pool: int | None) -> Any:
    """LitData's own botocore config (its adaptive retries) with the storage's bounds (a connection within 5 s, a byte
    within 30 s, 3 attempts where LitData makes 1,000: a store that stalls would hold the run for hours) and, where
    given, boto3's pool of `pool` connections. A `config` in `storage_options` replaces LitData's whole."""
    from iobench.storage.remote import bounds

    config = bounds.botocore_config()
    retries = {"max_attempts": bounds.ATTEMPTS, "mode": "adaptive"}
    return config.merge(type(config)(retries=retries, **({"max_pool_connections": pool} if pool else {})))


def check_fetched_index(cache: Path, where: str, spec: DatasetSpec) -> None:
    """The one `index.json` LitData fetched into `cache`, by the rules of `check_index`."""
    found = [p for p in cache.rglob(INDEX) if not p.is_symlink()]
    if len(found) != 1 or not found[0].is_file():
        raise ValueError(f"{where}: LitData left {len(found)} indexes in its cache, not one")
    try:
        index = read_json(found[0])
    except (OSError, ValueError) as exc:
        raise ValueError(f"{where}: unreadable ({exc})") from None
    index_chunks(index, where, spec)


def quiet_crash_reports() -> None:
    """LitData 0.2.76's chunk thread prints its own header and traceback when it dies (`PrepareChunksThread.
    _report_crash`), then its reader raises the same error to the loop ("Chunk prefetch thread crashed ... Original
    error: ..."), which the run says in one line: the printed traceback goes, the error stays."""
    from litdata.streaming import reader

    thread = getattr(reader, "PrepareChunksThread", None)
    if thread is not None and callable(getattr(thread, "_report_crash", None)):
        thread._report_crash = lambda self, exc: None


def _chunks_through_boto3() -> None:
    """LitData 0.2.76 fetches chunks through obstore when it is installed, with client options of its own that
    leave out `allow_http`: an http:// endpoint (the emulator on loopback, a store without TLS) then fails with
    BadScheme, and no option or variable of LitData's passes it. Its chunks go instead through its boto3 path,
    the one LitData takes where obstore is not installed (the study says so beside every LitData figure)."""
    import litdata.streaming.downloader as downloader

    downloader._OBSTORE_AVAILABLE = False


def index_chunks(index: Any, where: str, spec: DatasetSpec) -> list[tuple[str, int, int]]:
    """An index's chunks (name, bytes, items) once its fields are the writer's (never LitData's `pickle`
    serializer), with no compression or encryption, chunk names of the writer's form and every sample counted."""
    try:
        config, chunks = index["config"], index["chunks"]
        data_format, tree = config["data_format"], parse_json(config["data_spec"].encode(), f"{where} data_spec")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{where}: unreadable ({exc})") from None
    features = "numpy" if len(spec.shape) > 1 else f"no_header_numpy:{dtype_code(spec)}"
    if data_format != [features, "int", "int"] or tree != TREE:
        raise ValueError(f"{where}: fields {data_format} are not the {features}, int, int the writer stores")
    for key in ("compression", "encryption"):
        if config.get(key) is not None:
            raise ValueError(f"{where}: {key} {config[key]!r} is not read")
    found = []
    for entry in chunks if isinstance(chunks, list) else [None]:
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not CHUNK_NAME.fullmatch(name):
            raise ValueError(f"{where}: chunk {name!r} is not a plain chunk file (a name the writer gives)")
        size, items = entry.get("chunk_bytes"), entry.get("chunk_size")
        if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (size, items)):
            raise ValueError(f"{where}: chunk {name}: sizes {size!r}, {items!r} are not whole numbers")
        found.append((name, size, items))
    if sum(items for _, _, items in found) != spec.n_samples:
        raise ValueError(
            f"{where}: {sum(i for _, _, i in found)} samples in its chunks; the spec says {spec.n_samples}"
        )
    return found


def dtype_code(spec: DatasetSpec) -> int:
    from litdata.constants import _NUMPY_DTYPES_MAPPING

    return next(k for k, v in _NUMPY_DTYPES_MAPPING.items() if v == spec.np_dtype)


def release(ds: Any) -> None:
    """Unmap the chunks a StreamingDataset still maps. LitData 0.2.76 keeps the last chunk mapped after the
    dataset is dropped; a mapped page survives drop_caches, so the next cold epoch would read memory."""
    item_loader = getattr(getattr(getattr(ds, "cache", None), "_reader", None), "_item_loader", None)
    if hasattr(item_loader, "close"):
        item_loader.close(0)
