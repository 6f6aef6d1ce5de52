"""A format's objects as a run's storage (`ObjectStorage`), what moved by the server's or the clients' count
(`RequestCounters`), and the rule that keeps obstore's runtime out of forked workers."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobench.errors import IobenchError
from iobench.storage import Applied, Counters, Storage
from iobench.storage.remote import bounds, client_counts, requests_log
from iobench.storage.remote.cache_watch import CachePeak
from iobench.storage.remote.emulator import cpu_seconds
from iobench.storage.remote.targets import PLAIN, RemoteTarget


@dataclass(frozen=True)
class RequestSnapshot:
    log_bytes: int
    client: tuple[int, ...]  # the clients' own counts (client_counts)
    server_cpu: float
    cache_bytes: int | None  # the readers' own local caches (None: the readers keep none)
    cache_peak: int | None  # their most since the previous snapshot


class RequestCounters(Counters):
    """Requests and bytes by the server's access log; the server's and the shaper's CPU seconds; the bytes in
    the local cache folders of the readers that keep one (LitData's chunks), at each snapshot and at most
    between two."""

    def __init__(self, target: RemoteTarget, caches: CachePeak, client_counted: bool = True) -> None:
        self.target, self.caches, self.client_counted = target, caches, client_counted
        self.counts = client_counts.shared()  # made here, in the process whose workers fork later

    def snapshot(self, pids: Sequence[int] = ()) -> RequestSnapshot:
        log = self.target.access_log
        server = cpu_seconds(self.target.server_pids)
        cache, peak = self.caches.take() if self.caches.folders else (None, None)
        return RequestSnapshot(requests_log.size(log) if log else 0, self.counts.snapshot(), server, cache, peak)

    def delta(self, a: RequestSnapshot, b: RequestSnapshot) -> dict:
        common = {
            "data_block_device": self.target.endpoint.url,
            "process_read_bytes": None,
            "library_cache_bytes": b.cache_bytes,
            "library_cache_peak_bytes": b.cache_peak,
        }
        if self.target.access_log is None:  # a store iobench does not run: what its clients counted
            if not self.client_counted:  # a FUSE mount: its requests are rclone's own
                return {**common, "device_read_bytes": None, "requests": None, "requests_counted_by": "none (FUSE)"}
            seen = client_counts.ClientCounts.delta(a.client, b.client)
            return {**common, "device_read_bytes": seen.bytes_sent, "requests": seen, "requests_counted_by": "client"}
        seen = requests_log.read(self.target.access_log, a.log_bytes, b.log_bytes)
        return {
            **common,
            "device_read_bytes": seen.bytes_sent,
            "requests": seen,
            "requests_counted_by": "server",
            "server_cpu_seconds": b.server_cpu - a.server_cpu,
        }


# The process whose obstore has started its runtime (a store made here, for requests): obstore is not fork-safe
# (its tokio runtime's threads are not in a forked child, whose first request then waits forever), so a process
# that has used it must not fork DataLoader workers that use it again.
_OBSTORE_STARTED_IN = 0


def obstore_started_here() -> bool:
    return _OBSTORE_STARTED_IN == os.getpid()


def check_fork_safe(storage: Storage, workers: int) -> None:
    """Refuse, in one line, worker processes forked from a process whose obstore runtime has started, when they
    read objects (through a FUSE mount they read files: nothing to refuse)."""
    if workers > 0 and storage.kind == "object" and obstore_started_here():
        raise IobenchError(
            "--remote with --num-workers: this process has read object storage itself already, and "
            "obstore's runtime does not survive a fork; run configurations with workers in an "
            "`iobench run` of their own"
        )


_CLIENTS: dict[tuple, tuple[Any, dict[tuple[str, str], int]]] = {}  # ObjectStorage.client's, by endpoint and process


class ObjectStorage(Storage):
    """One format's objects: `bucket`/`prefix`/<file> at an endpoint."""

    kind = "object"
    libraries = ("obstore",)
    read_ahead: str | None = None  # a FUSE mount's (MountedStorage); the readers of objects read none ahead

    def __init__(
        self, target: RemoteTarget, bucket: str, prefix: str, files: list[str], sizes: dict[str, int] | None = None
    ) -> None:
        self.target, self.bucket, self.prefix, self._files = target, bucket, prefix.strip("/"), files
        self.sizes = sizes or {}  # each file's bytes by the manifest: no answer about it may be larger
        self._store: Any = None
        self._pid = 0
        self.caches: list[Path] = []  # the local cache folders of this storage's readers (`add_cache`)
        self.cache_peak = CachePeak(self.caches)

    @property
    def where(self) -> str:
        return f"s3://{self.bucket}/{self.prefix} at {self.target.endpoint.url}"

    def files(self) -> list[str]:
        return list(self._files)

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def url(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.key(name)}"

    def store(self) -> Any:
        """An obstore S3Store of the bucket, made in the process that reads (a client does not survive a fork)."""
        global _OBSTORE_STARTED_IN

        _OBSTORE_STARTED_IN = os.getpid()
        if self._store is None or self._pid != os.getpid():
            from obstore.store import S3Store

            e = self.target.endpoint
            self._store = S3Store(
                self.bucket,
                endpoint=e.url,
                access_key_id=e.access_key,
                secret_access_key=e.secret_key,
                region=e.region,
                virtual_hosted_style_request=False,
                client_options=bounds.obstore_client_options(e.url),
                retry_config=bounds.obstore_retry_config(),
            )
            self._pid = os.getpid()
        return self._store

    def bound(self, bucket: str, key: str) -> int | None:
        """The most bytes an answer about `bucket/key` may hold: the object's size by the manifest (None: not one
        of this storage's files)."""
        if bucket != self.bucket:
            return None
        name = key.removeprefix(f"{self.prefix}/") if self.prefix else key
        return self.sizes.get(name)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_store": None, "_pid": 0}

    def client(self) -> Any:
        """A boto3 S3 client of the endpoint, for what the process that forks the workers fetches itself (an
        index, presigned URLs, a listing): obstore there would leave the workers' obstore waiting forever. One per
        endpoint and process (making one took 0.07-0.2 s, once per configuration of a sweep); the sizes it holds
        answers to are this storage's files' (`bounds.bound_answers`)."""
        import boto3

        e = self.target.endpoint
        key = (os.getpid(), e.url, e.access_key, e.secret_key, e.region)
        if key not in _CLIENTS:
            made = boto3.client(
                "s3",
                endpoint_url=e.url,
                aws_access_key_id=e.access_key,
                aws_secret_access_key=e.secret_key,
                region_name=e.region,
                config=bounds.botocore_config(s3={"addressing_style": "path"}, signature_version="s3v4"),
            )
            sizes: dict[tuple[str, str], int] = {}
            bounds.bound_answers(made.meta.events, lambda bucket, name: sizes.get((bucket, name)))
            _CLIENTS[key] = (made, sizes)
            client_counts.shared().count_botocore(made.meta.events)
        made, sizes = _CLIENTS[key]
        sizes.update({(self.bucket, self.key(name)): size for name, size in self.sizes.items()})
        return made

    def stored_size(self, name: str) -> int | None:
        """The size of `name` at the store, None where it is not there; asked with boto3, as `client` says why."""
        head = self._head(self.url(name), lambda s3: s3.head_object(Bucket=self.bucket, Key=self.key(name)))
        return None if head is None else int(head["ContentLength"])

    def check_bucket(self) -> None:
        """The bucket exists (iobench never creates one): where it does not, S3 answers a PUT with a page of XML."""
        if self._head(f"bucket {self.bucket}", lambda s3: s3.head_bucket(Bucket=self.bucket)) is None:
            raise IobenchError(
                f"bucket {self.bucket} at {self.target.endpoint.url}: does not exist (iobench never creates one)"
            )

    def _head(self, what: str, ask: Any) -> dict | None:
        """A HEAD through a boto3 client: its answer, None for "not found", any other refusal one line naming
        `what` and the store (S3's code and message, or botocore's words for a store that broke off)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return ask(self.client())
        except ClientError as exc:
            error = exc.response.get("Error", {})
            if str(error.get("Code")) in ("404", "NoSuchKey", "NoSuchBucket", "NotFound"):
                return None
            raise IobenchError(
                f"{what} at {self.target.endpoint.url}: {error.get('Code')} {error.get('Message') or ''}".rstrip()
            ) from None
        except BotoCoreError as exc:
            raise IobenchError(f"{what} at {self.target.endpoint.url}: {exc}") from None

    def check_stored(self, fmt: str) -> None:
        """A store iobench does not run holds what was uploaded to it, not the dataset folder: every file of the
        format must be there at its prepared size, by one listing of the format's prefix (S3 lists 1,000 keys an
        answer). Else the run fails in the library's words mid-epoch (a traceback from LitData and
        s3torchconnector), reads another dataset's objects, or hands a library an object that announces 100 GiB.
        Skipped without boto3 (the `remote` extra has it; scripts/gpu_wheels.sh carries obstore alone, and obstore
        here would start its runtime in the process that forks the workers)."""
        if importlib.util.find_spec("boto3") is None or not self._files:
            return
        stored = self.listed()
        upload = f"`iobench upload --endpoint-url {self.target.endpoint.given} --formats {fmt}`"
        for name in self._files:
            size, prepared = stored.get(self.key(name)), self.sizes.get(name)
            if size is None:
                raise IobenchError(
                    f"{fmt} is not at {self.url(name)} ({self.target.endpoint.url}): {upload} puts it there"
                )
            if prepared is not None and size != prepared:
                raise IobenchError(
                    f"{self.url(name)} holds {size:,} bytes, not the {prepared:,} of this dataset's "
                    f"{name} (another dataset's {fmt}?): {upload} replaces it"
                )

    def listed(self) -> dict[str, int]:
        """Every key under the prefix with its size, by the store's listing (boto3's paginator)."""
        from botocore.exceptions import BotoCoreError, ClientError

        found: dict[str, int] = {}
        prefix = f"{self.prefix}/" if self.prefix else ""
        try:
            for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    found[str(item["Key"])] = int(item["Size"])
        except ClientError as exc:
            error = exc.response.get("Error", {})
            if error.get("Code") == "NoSuchBucket":
                raise IobenchError(
                    f"bucket {self.bucket} at {self.target.endpoint.url}: does not exist (iobench never creates one)"
                ) from None
            raise IobenchError(
                f"listing s3://{self.bucket}/{prefix} at {self.target.endpoint.url}: "
                f"{error.get('Code')} {error.get('Message') or ''}".rstrip()
            ) from None
        except (BotoCoreError, KeyError, TypeError, ValueError) as exc:
            raise IobenchError(f"listing s3://{self.bucket}/{prefix} at {self.target.endpoint.url}: {exc}") from None
        return found

    def fsspec_path(self, name: str = "") -> str:
        """`bucket/prefix/name` as fsspec is handed it, once every part is a plain name: fsspec reads `*`, `?`, `[`
        as a pattern, `::` as a chain and `#` as a fragment."""
        parts = [self.bucket, *(self.prefix.split("/") if self.prefix else []), *([name] if name else [])]
        for part in parts:
            if not PLAIN.fullmatch(part):
                raise ValueError(f"{self.where}: {part!r} is not a plain name that fsspec reads as it is")
        return "/".join(parts)

    def s3fs(self, reader: str, **options: Any) -> Any:
        """A fresh s3fs file system of the endpoint (no instance or listing cache shared with another reader), made
        in the process that reads; `reader` names who needs it, for the one line that says s3fs is missing."""
        try:
            import s3fs  # noqa: F401 - the message below when it is missing
        except ImportError:
            raise IobenchError(f"{reader} reads object storage through s3fs: pip install 'iobench[remote]'") from None
        bounded = bounds.bounded_s3fs()
        return bounded(**self.s3fs_options(), skip_instance_cache=True, use_listings_cache=False, **options)

    def s3fs_options(self) -> dict:
        """s3fs's options for the endpoint (its `S3FileSystem(**...)`, fsspec's `storage_options`): the endpoint's
        keys and URL, nothing from the environment; the requests' bounds (times, and the size an answer announces,
        through the aiobotocore session it is given)."""
        from aiobotocore.session import AioSession

        session = AioSession()
        bounds.bound_answers(session, self.bound)
        client_counts.shared().count_botocore(session)
        e = self.target.endpoint
        bounds.bounded_s3fs()  # fsspec's s3:// for a library that makes its own file system (datasets)
        return {
            "key": e.access_key,
            "secret": e.secret_key,
            "session": session,
            "config_kwargs": bounds.s3fs_config_kwargs(),
            "client_kwargs": {"endpoint_url": e.url, "region_name": e.region},
        }

    def make_cold(self) -> str:
        """Nothing is cached on the client by the readers of this storage; the emulator's own files are read
        through before each cold epoch, so that its disk never adds to the profile's latency."""
        if self.target.served is not None:
            for name in self._files:
                _read_through(self.target.served / self.bucket / self.key(name))
        return "no client cache"

    def residency(self) -> float:
        return 0.0

    def counters(self) -> Counters:
        return RequestCounters(self.target, self.cache_peak)

    @contextmanager
    def controls(self) -> Iterator[Applied]:
        """The readers' cache folders sampled through the run, for each epoch's peak."""
        with self.cache_peak.watching():
            yield Applied()

    def add_cache(self, folder: Path) -> None:
        """A reader's own cache folder of these objects, whose size each epoch's record keeps."""
        self.caches.append(folder)


def _read_through(path: Path) -> None:
    try:
        with open(path, "rb", buffering=0) as f:
            while f.read(8 * 2**20):
                pass
    except OSError:
        pass
