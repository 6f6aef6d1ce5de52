"""Preprocessing in the loop, identical for every format and loader.

`--transform augment` is the standard image training recipe (pad-and-crop for images up to 64
pixels, as for CIFAR; random resized crop above, as for ImageNet; horizontal flip; to float;
normalise), written in plain torch so that one implementation runs per sample on the host and
batched on the device; for other samples an elementwise cost of the same kind (scale, noise,
standardise). `cpu:US` spins for a fixed time per sample, for people who know what their pipeline
costs. `--transform-on host` runs it per sample where the loader reads (DataLoader workers, Ray
actors, the main process), as a classic pipeline does; `device` runs it on whole batches after the
copy, as tensordict's recipe does (on a CPU-only machine the device is the same cores).

Decoding (the `files` format's PNG) is part of reading, not of the transform.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from iobench.choices import Choice
from iobench.errors import IobenchError

PAD = 4  # pad-and-crop: pixels of zero padding on each side (the CIFAR recipe)
SMALL_IMAGE = 64  # up to this height, pad-and-crop; above, random resized crop
SCALE = (0.08, 1.0)  # random resized crop: share of the area, and aspect ratios (torchvision's)
RATIO = (3 / 4, 4 / 3)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CALIBRATION_SAMPLES = 256


class TransformOn(Choice):
    HOST = "host"
    DEVICE = "device"


def parse_transform(text: str) -> str:
    """none | augment | cpu:US, normalised; a typo fails before any work."""
    name = str(text).strip().lower()
    if name in ("none", "augment"):
        return name
    if name.startswith("cpu:"):
        try:
            micros = float(name[4:])
        except ValueError:
            micros = -1.0
        if math.isfinite(micros) and micros >= 0:
            return f"cpu:{micros:g}"
    raise IobenchError(f"unknown transform {text!r}; use none, augment or cpu:US (microseconds per sample)")


@dataclass(frozen=True)
class Transform:
    """One transform for one sample shape and dtype: `sample` for one, `batch` for many."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def image(self) -> bool:
        return self.dtype == "uint8" and len(self.shape) == 3 and self.shape[0] in (1, 3, 4) and self.shape[1] >= 8

    def sample(self, x: torch.Tensor) -> torch.Tensor:
        if self.name == "none":
            return x
        if self.name.startswith("cpu:"):
            _spin(float(self.name[4:]))
            return x
        return self.batch(x[None])[0]

    def batch(self, x: torch.Tensor) -> torch.Tensor:
        if self.name == "none":
            return x
        if self.name.startswith("cpu:"):
            for _ in range(x.shape[0]):
                _spin(float(self.name[4:]))
            return x
        if not self.image:
            return _elementwise(x)
        x = _pad_and_crop(x) if self.shape[1] <= SMALL_IMAGE else _random_resized_crop(x)
        x = _flip(x)
        if x.dtype == torch.uint8:
            x = x.float()
        channels = self.shape[0]
        mean = torch.tensor(IMAGENET_MEAN if channels == 3 else (0.5,) * channels, device=x.device) * 255
        std = torch.tensor(IMAGENET_STD if channels == 3 else (0.25,) * channels, device=x.device) * 255
        return (x - mean[:, None, None]) / std[:, None, None]

    def per_samples(self, features: torch.Tensor) -> torch.Tensor:
        """The host way: each sample on its own (own random crop, own flip), then stacked."""
        if self.name == "none":
            return features
        return torch.stack([self.sample(x) for x in features])

    def microseconds_per_sample(self, features: torch.Tensor) -> float:
        """What one sample costs on the host, measured on real samples in this process."""
        if self.name == "none":
            return 0.0
        n = min(len(features), CALIBRATION_SAMPLES)
        self.per_samples(features[: min(n, 8)])  # first calls allocate
        costs = []
        for _ in range(3):  # the median of three: one pass is at the mercy of a noisy neighbour
            start = time.perf_counter()
            self.per_samples(features[:n])
            costs.append((time.perf_counter() - start) / n * 1e6)
        return sorted(costs)[1]


def _spin(micros: float) -> None:
    end = time.perf_counter() + micros / 1e6
    while time.perf_counter() < end:
        pass


def _elementwise(x: torch.Tensor) -> torch.Tensor:
    """For non-image samples: a random gain, a little noise, standardised per sample."""
    x = x.float()
    dims = tuple(range(1, x.dim()))
    gain = 1 + 0.1 * torch.randn((x.shape[0],) + (1,) * len(dims), device=x.device)
    x = x * gain + 0.01 * torch.randn_like(x)
    return (x - x.mean(dim=dims, keepdim=True)) / (x.std(dim=dims, keepdim=True) + 1e-6)


def _pad_and_crop(x: torch.Tensor) -> torch.Tensor:
    n, channels, height, width = x.shape
    padded = F.pad(x, (PAD, PAD, PAD, PAD))
    top = torch.randint(0, 2 * PAD + 1, (n,), device=x.device)
    left = torch.randint(0, 2 * PAD + 1, (n,), device=x.device)
    rows = (top[:, None] + torch.arange(height, device=x.device))[:, None, :, None]
    cols = (left[:, None] + torch.arange(width, device=x.device))[:, None, None, :]
    batch = torch.arange(n, device=x.device)[:, None, None, None]
    return padded[batch, torch.arange(channels, device=x.device)[None, :, None, None], rows, cols]


def _random_resized_crop(x: torch.Tensor) -> torch.Tensor:
    """A crop of 8-100% of the area at an aspect ratio of 3/4..4/3, scaled back to the sample's size
    (bilinear); one sampling grid per sample, so a batch is one grid_sample."""
    n, _channels, height, width = x.shape
    area = torch.empty(n, device=x.device).uniform_(*SCALE)
    log_ratio = torch.empty(n, device=x.device).uniform_(math.log(RATIO[0]), math.log(RATIO[1]))
    w = torch.sqrt(area * torch.exp(log_ratio)).clamp(max=1.0)  # shares of the width and height
    h = torch.sqrt(area / torch.exp(log_ratio)).clamp(max=1.0)
    cx = (torch.rand(n, device=x.device) * (1 - w) + w / 2) * 2 - 1  # centres in [-1, 1]
    cy = (torch.rand(n, device=x.device) * (1 - h) + h / 2) * 2 - 1
    theta = torch.zeros(n, 2, 3, device=x.device)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = w, cx, h, cy
    grid = F.affine_grid(theta, [n, 1, height, width], align_corners=False)
    return F.grid_sample(x.float(), grid, mode="bilinear", align_corners=False)


def _flip(x: torch.Tensor) -> torch.Tensor:
    mask = torch.rand(x.shape[0], device=x.device) < 0.5
    return torch.where(mask[:, None, None, None], x.flip(-1), x)


def make_transform(name: str, shape: tuple[int, ...], dtype: str) -> Transform:
    return Transform(parse_transform(name), tuple(shape), dtype)
