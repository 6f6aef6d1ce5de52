"""A user's own pipeline, as a torchvision user writes it: ImageFolder over JPEGs with augmentation.

Nothing of iobench in it; `iobench run/tune --dataset-factory photos:make_dataset` times it. The folder
comes from $IOBENCH_PHOTOS (one subfolder per class)."""

import os

from torchvision import datasets, transforms


def make_dataset() -> datasets.ImageFolder:
    augment = transforms.Compose(
        [transforms.RandomResizedCrop(160), transforms.RandomHorizontalFlip(), transforms.PILToTensor()]
    )
    return datasets.ImageFolder(os.environ["IOBENCH_PHOTOS"], transform=augment)
