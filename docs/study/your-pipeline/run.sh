#!/usr/bin/env bash
# A user's own pipeline (photos.py: 2,000 224 px JPEGs decoded with Pillow, a random resized crop to 160
# and a flip, per sample) timed by `run --dataset-factory` with 0 and 2 workers (3 runs each), then
# searched by `tune --dataset-factory`, and the script tune pastes run three times to check its figure.
# Usage: run.sh JPEG_FOLDER OUT_DIR (the files-encoding study's run.sh writes such a folder: DATA/jpeg)
set -euo pipefail
export IOBENCH_PHOTOS=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
cd "$(dirname "$0")"  # photos.py is imported from the working directory
common=(--dataset-factory photos:make_dataset --batch-size 64 --device cpu -q)
for w in 0 2; do
  python -m iobench run "${common[@]}" --num-workers "$w" --runs 3 --results "$out/results.jsonl"
done
python -m iobench tune "${common[@]}" --budget-minutes 6 --results "$out/tune.jsonl" > "$out/tune.txt"
for k in 1 2 3; do python "$out/tune-best.py"; done > "$out/pasted.txt"
python -m iobench report "$out/results.jsonl" --out "$out/report" > /dev/null
