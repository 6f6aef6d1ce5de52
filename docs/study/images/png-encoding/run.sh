#!/usr/bin/env bash
# "Keep my JPEG folder?": one folder of 2,000 JPEG photos (224x224, quality 90, written from the image
# workload's generated photos) prepared twice, `files` re-encoded as PNG (the default) and kept as the
# JPEGs themselves (--files-encoding source), then read through the DataLoader, shuffled, warm and cold,
# 0 and 2 workers, batch 256, three runs each. Cold needs root. Usage: sudo run.sh DATA_DIR OUT_DIR
set -euo pipefail
data=$1 out=$2
mkdir -p "$out"
r="$out/results.jsonl"
python -m iobench prepare --size 2e3 --workload image --formats npy --data-dir "$data/generated" -q
python - "$data" <<'PY'
import sys
from pathlib import Path

import numpy as np
from PIL import Image

data = Path(sys.argv[1])
features = np.load(next((data / "generated").glob("*/npy/features.npy")), mmap_mode="r")
for i, image in enumerate(features):
    folder = data / "jpeg" / f"class{i % 10}"
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.moveaxis(np.asarray(image), 0, -1)).save(folder / f"{i:05d}.jpg", quality=90)
PY
sets=(--data-dir "$data/sets")
python -m iobench prepare --from "$data/jpeg" --formats npy,files "${sets[@]}" --dataset photos-png -q
python -m iobench prepare --from "$data/jpeg" --formats npy,files --files-encoding source "${sets[@]}" \
  --dataset photos-jpeg -q
common=(--format files --results "$r" --runs 3 -q --device cpu --batch-size 256)
for cache in warm cold; do
  for w in 0 2; do
    for kind in png jpeg; do
      python -m iobench run "${sets[@]}" --dataset "photos-$kind" --cache "$cache" --num-workers "$w" "${common[@]}"
    done
  done
done
python -m iobench report "$r" --out "$out/report" >/dev/null
python -m iobench info "${sets[@]}" > "$out/info.txt"
du -sh "$data/jpeg" >> "$out/info.txt"
