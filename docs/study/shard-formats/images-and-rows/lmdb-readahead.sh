#!/usr/bin/env bash
# LMDB with read-ahead on (iobench's choice since the page cache can hold the files) on the datasets of run.sh,
# cold and shuffled, and under the 20% budget (where it stays off): the same commands as run.sh's LMDB runs.
# Usage: sudo lmdb-readahead.sh DATA_DIR OUT_DIR
set -euo pipefail
data=$1 out=$2
r="$out/lmdb-readahead.jsonl"
common=(--format lmdb --results "$r" --runs 2 -q --device cpu --batch-size 256)
for workload in image tabular; do
  for w in 0 2; do
    python -m iobench run --data-dir "$data/$workload" --cache cold --num-workers "$w" "${common[@]}"
  done
done
python -m iobench run --data-dir "$data/small-image" --cache warm --cache-budget 20% --num-workers 0 \
  --max-seconds 5 "${common[@]}"
