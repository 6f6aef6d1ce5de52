"""What runs on a batch between the copy and the step (the decoder of `--decode-on device`, the transform of
`--transform-on device`), and the transform's calibrated cost."""

from __future__ import annotations

import numpy as np
import torch

from iobench.formats import FORMATS
from iobench.loaders import LOADERS
from iobench.loaders.decode import Decoder
from iobench.loaders.transforms import CALIBRATION_SAMPLES, TransformOn
from iobench.plan.config import RunConfig
from iobench.plan.resolve import ResolvedRun
from iobench.run.building import open_reader, transform_on
from iobench.run.epoch_log import EpochLog
from iobench.run.epochs import DeviceTransform
from iobench.run.failures import failure
from iobench.settings import DecodeOn
from iobench.system.contention import torch_threads


def device_transform(resolved: ResolvedRun, decoder: Decoder | None = None) -> DeviceTransform:
    """What runs on a batch between the copy and the step: the decoder (`--decode-on device`), then the transform
    (`--transform-on device`)."""
    transform = transform_on(resolved, TransformOn.DEVICE)
    batch = transform.batch if transform is not None else None
    if decoder is None or batch is None:
        return decoder or batch
    return lambda encoded: batch(decoder(encoded))


def decoder_of(resolved: ResolvedRun) -> Decoder | None:
    """The decoder after the copy, for `--decode-on device`; None otherwise."""
    c = resolved.config
    if c.settings.decode_on is not DecodeOn.DEVICE:
        return None
    options = FORMATS[c.format].options_from_json(resolved.entry.options)
    return Decoder(resolved.manifest.spec, options, resolved.device, c.seed)


def transform_cost(resolved: ResolvedRun) -> float | None:
    """Microseconds one sample's transform costs on the host, on the dataset's first samples, with the torch threads
    it runs with: one in each DataLoader worker, the run's in this process. Calibrated with torch's threads beside
    busy programs it read 34,360 µs a sample where the run's 2 workers delivered 337 samples/s (at most 5,900)."""
    c = resolved.config
    transform = transform_on(resolved, c.transform_on)
    if transform is None:
        return None
    spec, n = resolved.manifest.spec, min(resolved.manifest.spec.n_samples, CALIBRATION_SAMPLES)
    if resolved.storage.kind != "local":  # read here, object storage would be read before the workers fork
        features = np.random.default_rng(0).integers(0, 256, (n, *spec.shape)).astype(spec.np_dtype)
    else:
        try:
            with open_reader(resolved) as reader:
                features, _ = reader.read_range(0, n)
        except (OSError, ValueError) as exc:  # a sample it cannot read is said as the epochs would say it
            raise failure(exc, c) from None
    in_workers = c.transform_on is TransformOn.HOST and c.settings.num_workers > 0 and LOADERS[c.loader].forks
    with torch_threads(1 if in_workers else c.torch_threads):
        return transform.microseconds_per_sample(torch.from_numpy(features))


def possible_cost(cost: float | None, log: EpochLog, config: RunConfig) -> float | None:
    """The transform's calibrated cost, or None where the timed epochs rule it out: its samples cannot have cost
    more than the epoch's time over the processes that transformed them."""
    if cost is None or not log.timings:
        return cost
    processes = max(1, config.settings.num_workers) if config.transform_on is TransformOn.HOST else 1
    timing = sorted(log.timings, key=lambda t: t.seconds)[len(log.timings) // 2]
    bound = timing.seconds * 1e6 * processes / max(1, timing.samples)
    return cost if cost <= 1.25 * bound else None
