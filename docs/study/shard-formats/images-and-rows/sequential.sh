#!/usr/bin/env bash
# The same formats and loaders as run.sh, in storage order (--no-shuffle): how the stream formats are read
# when no shuffle is wanted (evaluation, or a format read the way it was written), and what the shuffle of
# run.sh costs each format. image and tabular, warm and cold, 0 and 2 workers, batch 256, two runs each, on
# the datasets of run.sh (run it first). Cold needs root. Usage: sudo sequential.sh DATA_DIR OUT_DIR
set -euo pipefail
data=$1 out=$2
r="$out/sequential.jsonl"
all=npy,hdf5,lmdb,memmap,files,webdataset,arrow,zarr,tfrecord,litdata
new=webdataset,arrow,zarr,tfrecord,litdata
common=(--results "$r" --runs 2 -q --device cpu --batch-size 256 --no-shuffle)
for workload in image tabular; do
  for cache in warm cold; do
    for w in 0 2; do
      d=(--data-dir "$data/$workload" --cache "$cache" --num-workers "$w")
      python -m iobench run --format "$all" --loader dataloader "${d[@]}" "${common[@]}"
      python -m iobench run --format "$new" --loader native "${d[@]}" "${common[@]}"
      python -m iobench run --format memmap --loader tensorclass "${d[@]}" "${common[@]}"
    done
  done
done
python -m iobench report "$r" --out "$out/report-sequential" >/dev/null
