"""A few hundred real photos as an ImageFolder: 160x160 JPEG crops of the sample photos that
scikit-image and scikit-learn ship, one class per source photo (pip install scikit-image scikit-learn).

    python docs/study/images/photos.py OUT_DIR [--per-photo 40]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image

NAMES = ("astronaut", "coffee", "chelsea", "rocket", "cat", "immunohistochemistry", "motorcycle_left")


def photos() -> dict[str, np.ndarray]:
    import skimage.data
    import sklearn.datasets

    found = {}
    for name in NAMES:
        try:
            image = getattr(skimage.data, name)()
        except Exception:  # some need a download; this machine has no network for them
            continue
        if image.ndim == 3 and image.shape[2] == 3:
            found[name] = image
    for name, image in zip(("china", "flower"), sklearn.datasets.load_sample_images().images, strict=True):
        found[name] = image
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--per-photo", type=int, default=40)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    total = 0
    for name, image in photos().items():
        folder = args.out / name
        folder.mkdir(parents=True, exist_ok=True)
        height, width = image.shape[:2]
        for k in range(args.per_photo):
            side = int(rng.integers(min(height, width) // 3, min(height, width)))
            top, left = int(rng.integers(0, height - side + 1)), int(rng.integers(0, width - side + 1))
            crop = Image.fromarray(image[top : top + side, left : left + side]).resize((160, 160), Image.BILINEAR)
            crop.save(folder / f"{k:03d}.jpg", quality=90)
            total += 1
    print(f"{total} JPEG crops in {len(list(args.out.iterdir()))} classes under {args.out}")


if __name__ == "__main__":
    main()
