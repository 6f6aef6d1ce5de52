"""How well PNG and lz4 compress iobench's synthetic photos against real ones (needs scikit-image
and scikit-learn for their sample photos: pip install scikit-image scikit-learn).

    python scripts/photo_content.py
"""

from __future__ import annotations

import io

import lz4.frame
import numpy as np
from PIL import Image

from iobench.data.dataset import generate
from iobench.spec import DatasetSpec


def ratios(images: list[np.ndarray]) -> tuple[float, float]:
    """Raw bytes over PNG bytes and over lz4 bytes, each image compressed on its own."""
    raw = sum(i.nbytes for i in images)
    png = 0
    for image in images:
        out = io.BytesIO()
        Image.fromarray(image).save(out, format="PNG")
        png += len(out.getvalue())
    return raw / png, raw / sum(len(lz4.frame.compress(i.tobytes())) for i in images)


def real_photos(side: int) -> list[np.ndarray]:
    import skimage.data
    import sklearn.datasets

    photos = [getattr(skimage.data, n)() for n in ("astronaut", "coffee", "chelsea", "rocket", "cat")]
    photos += list(sklearn.datasets.load_sample_images().images)
    crops = []
    for photo in photos:
        image = Image.fromarray(photo)
        s = min(image.size)
        left, top = (image.size[0] - s) // 2, (image.size[1] - s) // 2
        crops.append(np.asarray(image.crop((left, top, left + s, top + s)).resize((side, side), Image.BILINEAR)))
    return crops


def main() -> None:
    print(f"{'side':>5} {'source':<10} {'images':>6} {'PNG ratio':>9} {'lz4 ratio':>9}")
    for side in (224, 32):
        real = real_photos(side)
        print(f"{side:>5} {'real':<10} {len(real):>6} {ratios(real)[0]:>9.2f} {ratios(real)[1]:>9.2f}")
        chunk = next(generate(DatasetSpec(64, (3, side, side), "uint8", content="photo")))
        synthetic = [np.ascontiguousarray(np.moveaxis(x, 0, -1)) for x in chunk.features]
        png, lz = ratios(synthetic)
        print(f"{side:>5} {'synthetic':<10} {len(synthetic):>6} {png:>9.2f} {lz:>9.2f}")


if __name__ == "__main__":
    main()
