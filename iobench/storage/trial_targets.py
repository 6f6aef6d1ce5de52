"""A checkpoint's place as a trial's process reaches it (`trial_target`): its folder, or on object storage through
s3torchconnector's own S3 client, the one its libraries save and restore with there (`iobench.checkpoint.file_calls`,
DCP's S3StorageWriter), its keys from the trial's environment. boto3, which the session's target uses, would add 24 MB
to a trial's peak memory, the library's figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iobench.storage.checkpoints import CheckpointPlace, CheckpointTarget, LocalCheckpoints, ObjectCheckpoints


class ConnectorCheckpoints(ObjectCheckpoints):
    """The session's object target's behaviour (its pointer, its steps), over s3torchconnector's client."""

    def __init__(self, place: CheckpointPlace) -> None:  # the session's endpoint and request log are not the trial's
        from s3torchconnector import S3ClientConfig
        from s3torchconnector._s3client import S3Client

        bucket, key = place.bucket_key
        self.bucket, self.prefix, self.what, self.log = bucket, f"{key}/", place.url or "", None
        config = S3ClientConfig(force_path_style=True)
        self.client: Any = S3Client(place.region, endpoint=place.endpoint, s3client_config=config)

    def objects(self, prefix: str) -> dict[str, int]:
        found: dict[str, int] = {}
        for page in self.client.list_objects(self.bucket, prefix):
            found.update({item.key: item.size for item in page.object_info})
        return found

    def read_small(self, place: CheckpointPlace, name: str, limit: int) -> bytes:
        try:
            return self.client.get_object(self.bucket, f"{place.bucket_key[1]}/{name}").read(limit)
        except Exception as exc:  # the client's error for a missing object
            raise OSError(str(exc)[:100]) from None

    def write_small(self, place: CheckpointPlace, name: str, data: bytes) -> None:
        stream = self.client.put_object(self.bucket, f"{place.bucket_key[1]}/{name}")  # one PUT: the object whole
        stream.write(data)
        stream.close()

    def remove_prefix(self, prefix: str) -> None:
        for key in self.objects(prefix):
            self.client.delete_object(self.bucket, key)

    def environment(self) -> dict[str, str]:
        return {}  # the trial's own environment holds the keys


def trial_target(place: CheckpointPlace) -> CheckpointTarget:
    """The target a trial's process reaches its checkpoint's place through: the folder, or the place's bucket through
    the client its libraries use there, the keys in the trial's environment."""
    return LocalCheckpoints(Path(place.folder)) if place.local else ConnectorCheckpoints(place)
