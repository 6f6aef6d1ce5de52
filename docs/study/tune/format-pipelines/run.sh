#!/usr/bin/env bash
# tune over the formats' own pipelines and their library knobs, with shuffle quality weighed: the new-formats
# study's rows (50,000 x 128 float32) and 224 px images (2,000), prepared with every format by
# docs/study/shard-formats/images-and-rows/run.sh. Each search has tune's default 5 minutes, warm, batch 256 (rows) or 32 (images);
# rows are searched at the default --min-shuffle 0.9 and at 0 (speed alone); every pasted script is run once.
# Usage: run.sh DATA OUT [NAME ...] (DATA holds tabular/ and image/ as that study left them; NAMEs: only those searches)
set -euo pipefail
data=$1
out=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
only=" $* "
search() {  # name, data folder, format, batch size, extra options...
  local name=$1 dir=$2 fmt=$3 batch=$4
  shift 4
  if [ "$only" != "  " ] && [[ "$only" != *" $name "* ]]; then return; fi
  python -m iobench tune --format "$fmt" --data-dir "$data/$dir" --batch-size "$batch" \
    --device cpu --results "$out/$name.jsonl" -q "$@" > "$out/$name.txt"
  if [ -f "$out/$name-best.py" ]; then python "$out/$name-best.py" > "$out/$name-pasted.txt"; fi
}
search rows-litdata tabular litdata 256
search rows-litdata-speed tabular litdata 256 --min-shuffle 0
search rows-webdataset tabular webdataset 256
search images-litdata image litdata 32
