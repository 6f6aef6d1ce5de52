"""One file per sample in object storage, opened the way PyTorch users open it there: s3torchconnector's
`S3MapDataset.from_objects(uris, region=..., endpoint=..., s3client_config=S3ClientConfig(force_path_style=True))`.
Imported by `formats/files.py` only (one way): the names it is given are iobench's own layout, never listed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from iobench.errors import IobenchError

KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


# The environment is the process's: threads making their clients at once (--fetch-threads, --loader nodes) take
# turns, or one thread puts the caller's variables back while another's client reads them ("No signing
# credentials available").
KEYS_LOCK = threading.Lock()


@contextmanager
def endpoint_keys(endpoint: Any) -> Iterator[None]:
    """The endpoint's keys as the AWS variables while s3torchconnector's client is made (it reads credentials
    from the environment, and has no parameter for them), the caller's own variables back afterwards."""
    with KEYS_LOCK:
        saved = {name: os.environ.get(name) for name in KEYS}
        os.environ.pop("AWS_SESSION_TOKEN", None)
        os.environ.pop("AWS_PROFILE", None)
        os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"] = endpoint.access_key, endpoint.secret_key
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def open_objects(storage: Any, names: list[str]) -> tuple[Any, bytes]:
    """An `S3MapDataset` over the objects `names` of the storage (item k is names[k]), and the first object's
    bytes: that first request makes its client, with the endpoint's keys."""
    try:
        from s3torchconnector import S3ClientConfig, S3MapDataset
    except ImportError:
        raise IobenchError(
            "files from object storage read through s3torchconnector: pip install 'iobench[remote]'"
        ) from None
    from iobench.storage.remote.bounds import ATTEMPTS

    e = storage.target.endpoint
    config = S3ClientConfig(force_path_style=True, max_attempts=ATTEMPTS)  # it has no timeout of its own to set
    dataset = S3MapDataset.from_objects(
        [storage.url(name) for name in names], region=e.region, endpoint=e.url, s3client_config=config
    )
    with endpoint_keys(e):
        first = dataset[0].read()
    from iobench.storage.remote import client_counts

    client_counts.add("GET", len(first))
    return dataset, first
