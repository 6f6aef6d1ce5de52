#!/usr/bin/env bash
# Sharing the cores: every loader on the default dataset (1e6 x 128 float32, 520 MB per format), warm,
# shuffled and sequential, with 0 and 1 rival processes (--cpu-contention: a single-threaded matrix
# multiply each) and the main process's torch threads at 1 and at torch's default. Epochs are cut at 3 s
# (rates, not whole-epoch times). Ray is left out unless installed. Usage: docs/study/shared-cores/run.sh DATA OUT
set -euo pipefail
data=$1 out=$2
mkdir -p "$out"
r="$out/results.jsonl"
ds=n1000000_128_float32_c1000_s0
[[ -f "$data/$ds/manifest.json" ]] || python -m iobench prepare --size 1e6 --data-dir "$data" -q
python -m iobench limits --data-dir "$data/$ds" --results "$r"
common=(--data-dir "$data" --dataset "$ds" --results "$r" --device cpu --runs 2 --max-seconds 3 -q)
for rivals in 0 1; do
  for threads in default 1; do
    t=(); [[ $threads == default ]] || t=(--torch-threads "$threads")
    for order in --shuffle --no-shuffle; do
      args=("${common[@]}" "${t[@]}" --cpu-contention "$rivals" "$order")
      python -m iobench run --format npy,hdf5,lmdb,memmap --loader dataloader "${args[@]}"
      python -m iobench run --format memmap --loader tensorclass,direct "${args[@]}"
      python -m iobench run --format npy --loader gpu-resident "${args[@]}"
    done
  done
done
python -m iobench report "$r" --out "$out/report" >/dev/null
