#!/usr/bin/env bash
# Rank coverage of each pipeline at 2 and 3 ranks (small images, 3,000 samples, batch 64): usage run.sh OUT
set -euo pipefail
out=$1; mkdir -p "$out"; r="$out/ranks.jsonl"
python -m iobench prepare --workload small-image --size 3000 --formats npy,webdataset,litdata,arrow --data-dir /tmp/rk -q
python -m iobench prepare --workload small-image --size 3000 --formats webdataset \
  --format-option webdataset.shard_samples=500 --data-dir /tmp/rkw -q
python -m iobench prepare --workload small-image --size 3000 --formats webdataset \
  --format-option webdataset.shard_samples=750 --data-dir /tmp/rkw4 -q
for n in 2 3; do
  for pair in "litdata native" "arrow native" "npy dataloader"; do
    set -- $pair
    python -m iobench run --data-dir /tmp/rk --format "$1" --loader "$2" --nproc $n --batch-size 64 --runs 1 -q --results "$r"
  done
  python -m iobench run --data-dir /tmp/rkw --format webdataset --loader native --nproc $n --batch-size 64 --runs 1 -q --results "$r"
done
python -m iobench run --data-dir /tmp/rkw4 --format webdataset --loader native --nproc 3 --batch-size 64 --runs 1 -q --results "$r"
# the DataLoader's DistributedSampler on 3,001 samples (neither 2 nor 3 ranks divide it): trimmed, padded, dropped
python -m iobench prepare --workload small-image --size 3001 --formats npy --data-dir /tmp/rk1 -q
for n in 2 3; do
  for tail in trim pad drop; do
    python -m iobench run --data-dir /tmp/rk1 --format npy --loader dataloader --nproc $n --batch-size 64 \
      --distributed-sampler $tail --runs 1 -q --results "$out/sampler.jsonl"
  done
done
