#!/usr/bin/env bash
# The three rows searches of ../run.sh again after the DataLoader stopped carrying indices as a third tensor
# (a7cc757): tune's default 5 minutes each, warm, batch 256; every pasted script is run once here, and was
# then run twice more by hand (`python OUT/NAME-best.py | grep ^epoch >> OUT/NAME-pasted.txt`), so each
# *-pasted.txt holds one warm-up and six timed epochs from three processes.
# Usage: run.sh DATA OUT (DATA holds tabular/ as docs/study/new-formats-workloads/run.sh left it)
set -euo pipefail
data=$1
out=$(mkdir -p "$2" && cd "$2" && pwd)
search() {  # name, data folder, format, batch size, extra options...
  local name=$1 dir=$2 fmt=$3 batch=$4
  shift 4
  python -m iobench tune --format "$fmt" --data-dir "$data/$dir" --batch-size "$batch" \
    --device cpu --results "$out/$name.jsonl" -q "$@" > "$out/$name.txt"
  if [ -f "$out/$name-best.py" ]; then python "$out/$name-best.py" > "$out/$name-pasted.txt"; fi
}
search rows-litdata tabular litdata 256
search rows-litdata-speed tabular litdata 256 --min-shuffle 0
search rows-webdataset tabular webdataset 256
