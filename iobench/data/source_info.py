"""Where a dataset came from (`prepare --from`), as the manifest's spec records it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceInfo:
    """Where a dataset came from: enough to open it again, and to notice that it changed."""

    kind: str  # npy, npz, hdf5, tensordict, images
    path: str  # absolute
    features: str = ""  # the key or dataset name inside the source ('' for npy and images)
    labels: str = ""  # a path (npy, hdf5 as FILE:NAME), a key (npz, tensordict), or '' for zeros
    bytes: int = 0  # size of the source (files summed for a folder)
    mtime: float = 0.0  # newest modification time
    image_shape: tuple[int, ...] = ()  # images: C,H,W they are resized and cropped to

    def to_json(self) -> dict:
        d = dict(vars(self))
        d["image_shape"] = list(self.image_shape)
        return d

    @classmethod
    def from_json(cls, d: dict) -> SourceInfo:
        return cls(**{**d, "image_shape": tuple(int(x) for x in d.get("image_shape", ()))})
