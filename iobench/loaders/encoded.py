"""A batch of encoded samples (`--decode-on device`): each sample's file as it is (JPEG, PNG), read but not decoded,
handed over as one payload of bytes and their offsets, so that it crosses DataLoader workers, pinning and the copy
as two tensors; the decoder after the copy (`iobench.loaders.decode`) splits it again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Encoded:
    """`payload[offsets[k]:offsets[k + 1]]` is sample k's file."""

    payload: torch.Tensor  # uint8, every file one after the other
    offsets: torch.Tensor  # int64, len(files) + 1

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        return int(self.payload.numel())

    def files(self) -> list[torch.Tensor]:
        """Each sample's bytes, views of the payload."""
        bounds = self.offsets.tolist()
        return [self.payload[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Encoded:
        """The bytes stay on the host: the decoder takes them there (nvJPEG's `decode_jpeg(..., device="cuda")` takes
        host buffers and makes the copy itself)."""
        return self

    def pin_memory(self) -> Encoded:
        """Pinned, as the DataLoader pins a batch (its pin thread calls this)."""
        return Encoded(self.payload.pin_memory(), self.offsets)


def pack(files: Sequence[bytes]) -> Encoded:
    """Files as one payload and their offsets."""
    offsets = np.zeros(len(files) + 1, dtype=np.int64)
    np.cumsum([len(f) for f in files], out=offsets[1:])
    payload = np.frombuffer(b"".join(files), dtype=np.uint8).copy()  # owned: no view outlives the joined bytes
    return Encoded(torch.from_numpy(payload), torch.from_numpy(offsets))
