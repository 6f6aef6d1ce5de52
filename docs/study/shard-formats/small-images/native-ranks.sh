#!/usr/bin/env bash
# The formats' own pipelines under torchrun against one process: the study's rows (50,000 x 128 float32,
# five shards of 10,000 for WebDataset and TFRecord), warm, batch 256, no workers, 3 timed epochs each.
# Usage: native-ranks.sh DATA OUT.jsonl (DATA holds tabular/ as docs/study/shard-formats/images-and-rows/run.sh left it)
set -euo pipefail
for f in webdataset arrow tfrecord; do
  for n in 1 2; do
    iobench run --nproc "$n" --format "$f" --loader native --data-dir "$1/tabular" --batch-size 256 \
      --device cpu --runs 1 --epochs 3 --results "$2" -q
  done
done
