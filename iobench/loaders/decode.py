"""Decoding after the copy (`--decode-on device`): the loader reads each sample's file and hands its bytes over
(`iobench.loaders.encoded`), and the batch is decoded where the step runs, in one call, as DALI's "mixed" decoder and
torchvision's batched `decode_jpeg(list, device="cuda")` (nvJPEG) do: 5,708 photos/s on one H200 against 3,504 for
the DataLoader's 16 decoding workers.

- CUDA: JPEGs by `torchvision.io.decode_jpeg(files, device=...)` in one call; PNG has no GPU decoder in torchvision,
  so PNGs are decoded on the host in the same stage (the record's `decoder` says so).
- CPU: the same batched call on the CPU (libjpeg-turbo) where torchvision imports; where it does not (the index's
  build for torch 2.13 is a CUDA one beside the CPU torch: `doctor` says so), Pillow, through the very function the
  host path decodes with (`formats.files_layout.decode_sample`: the same pixels).
- After a torchvision decode each image is cropped (the format's crop: random as RandomResizedCrop draws it, or the
  centre prepare took) and resized bilinearly with antialiasing to the sample's size where it is (`crop_resized`).
"""

from __future__ import annotations

import importlib.metadata
import io
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from iobench.loaders.encoded import Encoded

JPEG_MAGIC = (0xFF, 0xD8)


def torchvision_io() -> Any | None:
    """torchvision's io module where it imports beside this torch; None otherwise (not installed, or a build for
    another torch: `operator torchvision::nms does not exist`)."""
    try:
        import torchvision.io as tio
    except Exception:  # a broken build raises RuntimeError (and others) at import
        return None
    return tio


def is_jpeg(data: torch.Tensor) -> bool:
    return len(data) > 2 and (int(data[0]), int(data[1])) == JPEG_MAGIC


def crop_box(
    crop: str, width: int, height: int, shape: tuple[int, ...], rng: np.random.Generator
) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the photo that becomes the sample: RandomResizedCrop's draw
    (`formats.photos.random_box`), or the region the host path's centre crop keeps of it (`photos.cover_crop`
    resizes to cover, then crops: the same region, in the photo's own pixels)."""
    from iobench.formats.photos import random_box

    if crop != "centre":
        return random_box(width, height, rng)
    _, out_h, out_w = shape
    scale = max(out_w / width, out_h / height)
    keep_w, keep_h = min(width, round(out_w / scale)), min(height, round(out_h / scale))
    left, top = (width - keep_w) // 2, (height - keep_h) // 2
    return left, top, left + keep_w, top + keep_h


def crop_resized(image: torch.Tensor, box: tuple[int, int, int, int], height: int, width: int) -> torch.Tensor:
    """The box of a (C, h, w) uint8 image resized to (C, height, width) uint8 where the image is (bilinear with
    antialiasing, as torchvision's v2 resize on tensors)."""
    left, top, right, bottom = box
    region = image[:, top:bottom, left:right]
    if region.shape[-2:] == (height, width):
        return region
    resized = F.interpolate(
        region[None].float(), size=(height, width), mode="bilinear", antialias=True, align_corners=False
    )
    return resized[0].round_().clamp_(0, 255).to(torch.uint8)


class Decoder:
    """The batch's files decoded to the samples' features, stacked on `device` (the stage between the copy and the
    step). `describe` is what the record keeps as `decoder`."""

    def __init__(
        self, spec: Any, options: Any, device: torch.device, seed: int = 0, tio: Any | None = None, pillow: bool = False
    ) -> None:
        self.spec, self.options, self.device = spec, options, device
        self.rng = np.random.default_rng([spec.seed, seed, 7])
        self.tio = None if pillow else (tio or torchvision_io())
        self.photos = options.encoding == "photos"

    @property
    def describe(self) -> str:
        """Where and with what it decodes."""
        if self.tio is not None:
            version = importlib.metadata.version("torchvision")
            if self.device.type == "cuda":
                return f"torchvision {version} decode_jpeg on {self.device} (nvJPEG; PNG on the host)"
            return f"torchvision {version} decode_jpeg on the CPU, the batch in one call"
        import PIL

        return f"Pillow {PIL.__version__} on the host, after the hand-over (torchvision does not import)"

    def __call__(self, encoded: Encoded) -> torch.Tensor:
        files = encoded.files()
        if self.tio is None:
            return self._pillow(files).to(self.device)
        return self._torchvision(files)

    def _pillow(self, files: list[torch.Tensor]) -> torch.Tensor:
        """The host path's own decoding and crop, one file after another."""
        from iobench.formats.files_layout import decode_sample

        out = torch.empty((len(files), *self.spec.shape), dtype=torch.uint8)  # images: uint8 (prepare checks)
        for k, data in enumerate(files):
            sample = decode_sample(
                io.BytesIO(data.numpy().tobytes()), self.spec, self.options, f"file {k} of the batch", self.rng
            )
            out[k].numpy()[...] = sample
        return out

    def _torchvision(self, files: list[torch.Tensor]) -> torch.Tensor:
        """JPEGs in one batched call (nvJPEG on CUDA), PNGs one by one on the host; each then arranged as a sample."""
        tio = self.tio
        gray = self.spec.shape[0] == 1 if self.photos else _channels(self.spec.shape) == 1
        mode = tio.ImageReadMode.GRAY if gray else tio.ImageReadMode.RGB
        jpeg = [k for k, f in enumerate(files) if is_jpeg(f)]
        images: dict[int, torch.Tensor] = {}
        if jpeg:
            device = self.device if self.device.type == "cuda" else "cpu"
            decoded = tio.decode_jpeg([files[k] for k in jpeg], mode=mode, device=device)
            images.update(zip(jpeg, decoded, strict=True))
        for k in sorted(set(range(len(files))) - set(jpeg)):
            images[k] = tio.decode_image(files[k], mode=mode).to(self.device)
        out = torch.empty((len(files), *self.spec.shape), dtype=torch.uint8, device=self.device)
        for k in range(len(files)):
            out[k] = self._sample(images[k].to(self.device), k)
        return out

    def _sample(self, image: torch.Tensor, k: int) -> torch.Tensor:
        """A decoded (C, h, w) image as the dataset's sample: a photo cropped and resized, an iobench PNG checked
        against the spec and laid out as it (H, W; C, H, W; or H, W, C)."""
        shape = self.spec.shape
        h, w = image.shape[-2:]
        if self.photos:
            _, height, width = shape
            return crop_resized(image, crop_box(self.options.crop, w, h, shape, self.rng), height, width)
        from iobench.formats.files_layout import png_axes

        axes = png_axes(shape)
        height, width = shape[1:] if axes == "chw" else shape[:2]
        if (h, w) != (height, width):
            raise ValueError(f"file {k} of the batch: an image of {w}x{h}; the spec says {shape} uint8")
        if axes == "hwc":
            return image.permute(1, 2, 0)
        return image[0] if axes == "hw" else image


def _channels(shape: tuple[int, ...]) -> int:
    from iobench.formats.files_layout import png_axes

    axes = png_axes(shape)
    return 1 if axes == "hw" else (shape[0] if axes == "chw" else shape[2])
