#!/usr/bin/env bash
# Resuming mid-epoch (--resume-check) for each pipeline on the rank-coverage dataset (small images, 3,000 samples,
# batch 64, shuffled, one timed epoch after a warm-up): usage run.sh OUT
set -euo pipefail
out=$1; mkdir -p "$out"; r="$out/resume.jsonl"
python -m iobench prepare --workload small-image --size 3000 --formats npy,webdataset,litdata,arrow,lance \
  --data-dir /tmp/rk -q
for combo in "npy dataloader 0" "npy dataloader 2" "npy nodes 2" "npy spdl 2" "npy direct 0" "npy ray-data 1" \
             "litdata native 0" "litdata native 2" "arrow native 0" "webdataset native 0" "webdataset native 2" \
             "lance native 0"; do
  set -- $combo
  python -m iobench run --data-dir /tmp/rk --format "$1" --loader "$2" --num-workers "$3" --batch-size 64 \
    --runs 1 --resume-check --device cpu -q --results "$r"
done
