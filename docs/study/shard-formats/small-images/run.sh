#!/usr/bin/env bash
# A first look at the formats people choose today beside the classic five: small-image samples (3x32x32
# uint8, CIFAR-sized, 20,000 of them), every format through the DataLoader and the five new ones through
# their own pipelines (--loader native), tensorclass on memmap, torchdata.nodes threads (2) on every format;
# shuffled, warm and cold, 0 and 2 workers (processes or threads), batch 256, three runs each. Speed,
# shuffle quality (spread/order), bytes on disk and write time in one report. Cold needs root (drop_caches).
# Usage: sudo docs/study/shard-formats/small-images/run.sh DATA_DIR OUT_DIR
set -euo pipefail
data=$1 out=$2
mkdir -p "$out"
r="$out/results.jsonl"
python -m iobench prepare --size 2e4 --workload small-image --data-dir "$data" --formats all -q
python -m iobench limits --data-dir "$data" --results "$r" --probe-size 256M
common=(--data-dir "$data" --results "$r" --runs 3 -q --device cpu --batch-size 256)
for cache in warm cold; do
  for w in 0 2; do
    python -m iobench run --format npy,hdf5,lmdb,memmap,files,webdataset,arrow,zarr,tfrecord,litdata \
      --loader dataloader --num-workers "$w" --cache "$cache" "${common[@]}"
    python -m iobench run --format webdataset,arrow,zarr,tfrecord,litdata --loader native --num-workers "$w" \
      --cache "$cache" "${common[@]}"
    python -m iobench run --format memmap --loader tensorclass --num-workers "$w" --cache "$cache" "${common[@]}"
    if [ "$w" -gt 0 ]; then  # threads instead of worker processes (torchdata.nodes), every format
      python -m iobench run --format npy,hdf5,lmdb,memmap,files,webdataset,arrow,zarr,tfrecord,litdata \
        --loader nodes --num-workers "$w" --cache "$cache" "${common[@]}"
    fi
  done
done
python -m iobench limits --data-dir "$data" --results "$r" --probe-size 256M --keep-best
python -m iobench report "$r" --out "$out/report" >/dev/null
python -m iobench info --data-dir "$data" > "$out/info.txt"
