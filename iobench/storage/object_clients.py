"""The S3 clients an object checkpoint target talks through, behind one small interface (`ObjectClient`): the
session's, boto3's client with iobench's timeouts (it lists and removes a run's prefix), and a trial's,
s3torchconnector's own client, the one its libraries save and restore with there (boto3 would add 24 MB to a trial's
peak memory, the library's figure). The target's behaviour (its places, pointers and steps) is written once, over
either (`iobench.storage.checkpoints.ObjectCheckpoints`)."""

from __future__ import annotations

from typing import Any, Protocol

from iobench.storage.remote.endpoint import Endpoint


class ObjectClient(Protocol):
    def objects(self, bucket: str, prefix: str) -> dict[str, int]:
        """Every object under `prefix`, with its size."""

    def read(self, bucket: str, key: str, limit: int) -> bytes:
        """At most `limit` bytes of an object; OSError where it is not there."""

    def write(self, bucket: str, key: str, data: bytes) -> None:
        """An object replaced whole, in one PUT."""

    def delete(self, bucket: str, keys: list[str]) -> None: ...


class Boto3Objects:
    """boto3's client of the store at `endpoint`, its keys given by the endpoint."""

    def __init__(self, endpoint: Endpoint) -> None:
        from iobench.storage.remote.writable_store import s3_client

        self.client: Any = s3_client(endpoint)

    def objects(self, bucket: str, prefix: str) -> dict[str, int]:
        found: dict[str, int] = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            found.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
        return found

    def read(self, bucket: str, key: str, limit: int) -> bytes:
        try:
            answer = self.client.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{limit - 1}")
        except Exception as exc:  # botocore's ClientError for a missing key
            raise OSError(str(exc)[:100]) from None
        return answer["Body"].read(limit)

    def write(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def delete(self, bucket: str, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[start : start + 1000]]
            self.client.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})


class ConnectorObjects:
    """s3torchconnector's client of the store at `endpoint_url`, its keys from this process's environment."""

    def __init__(self, region: str, endpoint_url: str | None) -> None:
        from s3torchconnector import S3ClientConfig
        from s3torchconnector._s3client import S3Client

        config = S3ClientConfig(force_path_style=True)
        self.client: Any = S3Client(region, endpoint=endpoint_url, s3client_config=config)

    def objects(self, bucket: str, prefix: str) -> dict[str, int]:
        found: dict[str, int] = {}
        for page in self.client.list_objects(bucket, prefix):
            found.update({item.key: item.size for item in page.object_info})
        return found

    def read(self, bucket: str, key: str, limit: int) -> bytes:
        try:
            return self.client.get_object(bucket, key).read(limit)
        except Exception as exc:  # the client's error for a missing object
            raise OSError(str(exc)[:100]) from None

    def write(self, bucket: str, key: str, data: bytes) -> None:
        stream = self.client.put_object(bucket, key)
        stream.write(data)
        stream.close()

    def delete(self, bucket: str, keys: list[str]) -> None:
        for key in keys:
            self.client.delete_object(bucket, key)
