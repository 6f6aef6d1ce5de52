#!/usr/bin/env bash
# The libraries' own read knobs on the datasets of run.sh (run it first), through `run --format-option`:
# LitData's batch_decode (samples deserialised together) and item_shuffle_window, WebDataset's buffer and
# TFRecord's shuffle queue, each against its default; shuffled, warm, batch 256, two runs, 0 and 2 workers.
# Appends to the same records, then regenerates the report. Usage: sudo knobs.sh DATA_DIR OUT_DIR
set -euo pipefail
data=$1 out=$2
r="$out/results.jsonl"
common=(--loader native --results "$r" --runs 2 -q --device cpu --batch-size 256 --cache warm)
for workload in image tabular; do
  for w in 0 2; do
    d=(--data-dir "$data/$workload" --num-workers "$w")
    python -m iobench run --format litdata "${d[@]}" "${common[@]}" --format-option litdata.batch_decode=0
    python -m iobench run --format litdata "${d[@]}" "${common[@]}" --format-option litdata.batch_decode=0 \
      --format-option litdata.item_shuffle_window=full
    python -m iobench run --format webdataset "${d[@]}" "${common[@]}" --format-option webdataset.shuffle_buffer=10000
    python -m iobench run --format tfrecord "${d[@]}" "${common[@]}" --format-option tfrecord.shuffle_queue=10000
  done
done
python -m iobench report "$r" --out "$out/report" >/dev/null
