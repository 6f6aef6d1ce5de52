"""Where an S3-compatible store is and with which keys: iobench's own server on loopback, or a store named by
`--endpoint-url` (http(s)://host:port/bucket, keys from the variables every AWS SDK reads), checked to answer
before anything is asked of it."""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from iobench.errors import IobenchError

REGION = "us-east-1"
CONNECT_TIMEOUT_S = 5.0  # how long a store named by --endpoint-url has to accept a connection
# S3's legacy rules for a bucket's name (letters, digits, '.', '_' and '-', up to 255), which S3-compatible servers
# keep: `iobench serve` names a bucket after each dataset, whose names hold underscores (AWS's rules today allow
# 3-63 lowercase letters, digits, '.' and '-': a real bucket a dataset is uploaded to usually has such a name)
BUCKET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


@dataclass(frozen=True)
class Endpoint:
    """Where an S3 client connects, and with which keys."""

    url: str
    access_key: str
    secret_key: str
    region: str = REGION
    bucket: str | None = None  # the bucket a store's URL names (None: each dataset's own name)

    def bucket_for(self, dataset: str) -> str:
        """Where a dataset's formats are at this store: the bucket its URL names, else one of the dataset's name."""
        return self.bucket or dataset

    def prefix_for(self, dataset: str) -> str:
        """The keys' prefix of a dataset's formats in `bucket_for(dataset)`: none in a bucket of its own name (as
        `iobench serve` serves it), the dataset's name in a bucket the URL names (two datasets uploaded to one bucket
        overwrote each other, their formats keyed by format alone)."""
        return "" if self.bucket in (None, dataset) else f"{dataset}/"

    @property
    def given(self) -> str:
        """The URL as `--endpoint-url` takes it, the bucket included."""
        return f"{self.url}/{self.bucket}" if self.bucket else self.url

    def environment(self) -> dict[str, str]:
        """The variables every AWS SDK reads (boto3, s3fs, LitData, s3torchconnector)."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL": self.url,
        }


def endpoint_from_environment(url: str) -> Endpoint:
    """A store iobench did not start (`--endpoint-url`), with the keys every AWS SDK reads from the environment.
    A path names the bucket (http(s)://host:port/bucket, as a path-style S3 URL does): the dataset's folder name,
    the bucket otherwise, is not a valid AWS bucket name (it holds underscores)."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL": an unclosed bracket
        raise IobenchError(
            f"--endpoint-url {url!r}: not an address ({exc}); expected http(s)://host:port/bucket"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        raise IobenchError(
            f"--endpoint-url {url!r}: expected http(s)://host:port/bucket (port and bucket "
            "optional), with no credentials in it"
        )
    check_port(url, parts.netloc)
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise IobenchError(f"--endpoint-url {url!r}: a query or fragment is not part of a store's address")
    bucket = parts.path.strip("/") or None
    if bucket is not None and not BUCKET_NAME.fullmatch(bucket):
        raise IobenchError(
            f"--endpoint-url {url!r}: {bucket!r} is not a bucket name (letters, digits, '.', '_' and "
            "'-', beginning with a letter or digit)"
        )
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        raise IobenchError("--endpoint-url needs the store's keys in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or REGION
    return Endpoint(f"{parts.scheme}://{parts.netloc}", key, secret, region, bucket)


def check_port(url: str, netloc: str) -> None:
    """A port, where the address has one, is 1-65535 in ASCII digits (urllib takes `+1`, `1_8`, full-width digits
    and `:-1` in its own ways, and `:0` became "nothing answers at port 80")."""
    host_port = netloc.rsplit("]", 1)[-1]  # an IPv6 literal's colons are inside its brackets
    if ":" not in host_port:
        return
    port = host_port.split(":", 1)[1]
    if not re.fullmatch(r"[0-9]{1,5}", port, re.ASCII) or not 1 <= int(port) <= 65535:
        raise IobenchError(f"--endpoint-url {url!r}: port {port!r} is not a port (1-65535)")


def store_at(url: str) -> Endpoint:
    """A store named by --endpoint-url, once something answers there: where nothing listens (a wrong port, a store
    not started) the command ends in one line at once, not after the S3 client's ten retries (obstore's took 2-9 s
    here, then a run failed mid-measurement and `limits` with a traceback)."""
    endpoint = endpoint_from_environment(url)
    parts = urlsplit(endpoint.url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__  # a timeout has no strerror
        raise IobenchError(f"--endpoint-url {url}: nothing answers at {host}:{port} ({reason})") from None
    return endpoint
