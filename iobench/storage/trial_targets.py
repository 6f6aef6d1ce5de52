"""A checkpoint's place as a trial's process reaches it (`trial_target`): its folder, or on object storage through
s3torchconnector's own S3 client (`iobench.storage.object_clients.ConnectorObjects`), the one its libraries save and
restore with there (`iobench.checkpoint.file_calls`, DCP's S3StorageWriter), its keys from the trial's environment.
The session's endpoint and request log are not the trial's."""

from __future__ import annotations

from pathlib import Path

from iobench.storage.checkpoints import CheckpointPlace, CheckpointTarget, LocalCheckpoints, ObjectCheckpoints


def trial_target(place: CheckpointPlace) -> CheckpointTarget:
    """The target a trial's process reaches its checkpoint's place through: the folder, or the place's bucket through
    the client its libraries use there, the keys in the trial's environment."""
    if place.local:
        return LocalCheckpoints(Path(place.folder))
    from iobench.storage.object_clients import ConnectorObjects

    return ObjectCheckpoints(ConnectorObjects(place.region, place.endpoint), place, place.url or "")
