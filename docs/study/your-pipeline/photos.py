"""A user's own pipeline, as people write it without a library: one JPEG per sample decoded with Pillow,
a random resized crop to 160 px and a random flip (torchvision's RandomResizedCrop and RandomHorizontalFlip
in spirit; torchvision itself does not load beside this venv's CPU torch), labels from the class folders.

Nothing of iobench in it; `iobench run/tune --dataset-factory photos:make_dataset` times it. The folder
comes from $IOBENCH_PHOTOS (one subfolder per class)."""

import os
import random
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

SIZE = 160


class Photos(Dataset):
    def __init__(self, root: str) -> None:
        self.files = sorted(Path(root).rglob("*.jpg"))
        classes = sorted({f.parent.name for f in self.files})
        self.labels = [classes.index(f.parent.name) for f in self.files]

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        with Image.open(self.files[i]) as image:
            image = image.convert("RGB")
        width, height = image.size
        side = random.randint(min(width, height) // 2, min(width, height))
        x, y = random.randint(0, width - side), random.randint(0, height - side)
        image = image.resize((SIZE, SIZE), Image.BILINEAR, box=(x, y, x + side, y + side))
        if random.random() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        return torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1), self.labels[i]


def make_dataset() -> Photos:
    return Photos(os.environ["IOBENCH_PHOTOS"])
