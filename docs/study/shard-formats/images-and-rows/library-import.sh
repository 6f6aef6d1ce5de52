#!/usr/bin/env bash
# The DataLoader with 2 (non-persistent) workers over the formats whose library iobench did not import in the
# main process before it forked them (datasets, webdataset, zarr, tfrecord): every worker imported it again
# every epoch. The same commands as run.sh's runs with 2 workers, re-measured with the library imported first.
# Cold needs root. Usage: sudo library-import.sh DATA_DIR OUT_DIR
set -euo pipefail
data=$1 out=$2
r="$out/library-import.jsonl"
common=(--format webdataset,arrow,zarr,tfrecord --loader dataloader --results "$r" --runs 2 -q --device cpu \
  --batch-size 256 --num-workers 2)
for workload in image tabular; do
  for cache in warm cold; do
    python -m iobench run --data-dir "$data/$workload" --cache "$cache" "${common[@]}"
  done
done
python -m iobench run --data-dir "$data/image" --cache warm --transform augment "${common[@]}"
