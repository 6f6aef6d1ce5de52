"""A format defined outside iobench, as a plug-in package would: the npy layout under another name."""

from iobench.formats.npy import NpyFormat


class ToyFormat(NpyFormat):
    name = "toy"


class NotAFormat:
    name = "broken"


class Raises(NpyFormat):
    """A plug-in with a bug: building it fails."""

    name = "raises"

    def __init__(self) -> None:
        raise RuntimeError("a bug in the plug-in")


class Exits(NpyFormat):
    name = "exits"

    def __init__(self) -> None:
        raise SystemExit(3)


class Interrupts(NpyFormat):
    name = "interrupts"

    def __init__(self) -> None:
        raise KeyboardInterrupt


def _whole(batch):
    """Collate for `_Batches`, whose items are whole batches already (module level: workers pickle it)."""
    return batch


class _Batches:
    """A map-style dataset that reads a whole batch per call, with the samples' indices."""

    def __init__(self, reader) -> None:
        self.reader = reader

    def __len__(self) -> int:
        return len(self.reader)

    def __getitems__(self, keys):
        import numpy as np
        import torch

        indices = np.asarray(keys, dtype=np.int64)
        features, labels = self.reader.batch(indices)
        return torch.from_numpy(features), torch.from_numpy(labels), torch.from_numpy(indices)


class PipedFormat(NpyFormat):
    """A plug-in that brings its own pipeline (`--loader native`), as a library's format would."""

    name = "piped"

    def pipeline(self, reader, read):
        from iobench.formats.base import Pipeline

        return Pipeline(_Batches(reader), read.batch_size, shuffle=read.shuffle, collate_fn=_whole)
