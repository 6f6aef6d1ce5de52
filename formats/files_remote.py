"""One file per sample in object storage, read the way PyTorch users read it there: s3torchconnector's
`S3MapDataset.from_objects(uris, region=..., endpoint=..., s3client_config=S3ClientConfig(force_path_style=True))`,
one GET of a whole object per sample by index. The object names are iobench's own (`sample_path` of each index),
never names listed from the bucket; each object is decoded with the local reader's checks.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from iobench.errors import IobenchError
from iobench.formats.files import LABELS, FilesReader, decode_sample, sample_path
from iobench.formats.npy import checked_header
from iobench.spec import LABEL_DTYPE

KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


@contextmanager
def endpoint_keys(endpoint: Any) -> Iterator[None]:
    """The endpoint's keys as the AWS variables while s3torchconnector's client is made (it reads credentials
    from the environment, and has no parameter for them), the caller's own variables back afterwards."""
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


class _ObjectHandle:
    def __init__(self, labels: np.ndarray, dataset: Any) -> None:
        self.labels, self.dataset = labels, dataset

    def close(self) -> None:
        self.dataset = None


class FilesObjectReader(FilesReader):
    """Samples by index through an `S3MapDataset` over the labels object and every sample's object, in index
    order (item 0 is the labels, item i + 1 sample i); its client is made in the process that reads."""

    imports = ("s3torchconnector",)

    def _local_directory(self) -> Path | None:
        return None

    def _open(self) -> _ObjectHandle:
        try:
            from s3torchconnector import S3ClientConfig, S3MapDataset
        except ImportError:
            raise IobenchError("files from object storage read through s3torchconnector: pip install "
                               "'iobench[remote]'") from None  # fmt: skip
        storage, spec = self.storage, self.spec
        names = [LABELS, *(sample_path(i, spec, self.options.file_suffix) for i in range(spec.n_samples))]
        e = storage.target.endpoint
        dataset = S3MapDataset.from_objects([storage.url(name) for name in names], region=e.region, endpoint=e.url,
                                            s3client_config=S3ClientConfig(force_path_style=True))  # fmt: skip
        with endpoint_keys(e):
            data = dataset[0].read()  # the first request makes the client
        stream = io.BytesIO(data)
        offset = checked_header(storage.url(LABELS), stream, len(data), np.dtype(LABEL_DTYPE), (spec.n_samples,))
        labels = np.frombuffer(data, dtype=LABEL_DTYPE, offset=offset)
        return _ObjectHandle(labels, dataset)

    def _close(self, handle: _ObjectHandle) -> None:
        handle.close()

    def _features(self, index: int) -> np.ndarray:
        relative = sample_path(index, self.spec, self.options.file_suffix)
        data = self.handle.dataset[index + 1].read()
        return decode_sample(io.BytesIO(data), self.spec, self.options, relative)
