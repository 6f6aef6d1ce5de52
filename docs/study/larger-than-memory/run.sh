#!/usr/bin/env bash
# The "larger than memory" figures of docs/study.md: one dataset of 2e6 samples (1.04 GB per format),
# page cache capped at 20% and 5% of it, cold epochs; then a 400 MB/s read throttle against fio.
# Needs root. Usage: sudo docs/study/larger-than-memory/run.sh DATA_DIR OUT_DIR
set -euo pipefail
data=$1 out=$2
mkdir -p "$out"
r="$out/results.jsonl"
python -m iobench limits --data-dir "$data" --results "$r"
common=(--data-dir "$data" --results "$r" --cache cold --runs 2 -q --device cpu)
for budget in none 20% 5%; do
  b=(); [[ $budget == none ]] || b=(--cache-budget "$budget")
  python -m iobench run --format memmap --loader tensorclass,dataloader --no-shuffle "${common[@]}" "${b[@]}"
  python -m iobench run --format npy --no-shuffle "${common[@]}" "${b[@]}"
done
# shuffled under a budget: small batches and a time cap, or one epoch takes hours (see the study)
for budget in none 20%; do
  b=(); [[ $budget == none ]] || b=(--cache-budget "$budget")
  python -m iobench run --format memmap --loader tensorclass,dataloader --batch-size 64 --max-seconds 5 \
    "${common[@]}" "${b[@]}"
done
python -m iobench limits --data-dir "$data" --results "$r" --read-limit 400
python -m iobench run --format memmap --loader tensorclass --no-shuffle "${common[@]}" --read-limit 400 --runs 3
python scripts/bench_ceilings.py "$(ls "$data"/*/npy/features.npy | head -1)" --read-limit 400 --rounds 2 \
  | tee "$out/fio_throttled.md"
python scripts/bench_ceilings.py "$(ls "$data"/*/npy/features.npy | head -1)" --rounds 2 | tee "$out/fio.md"
python -m iobench report "$r" --out "$out/report" >/dev/null
