#!/usr/bin/env bash
# --loader direct against tensorclass and the DataLoader on the same 1.04 GB dataset, in one run:
# cold sequential under a 400 MB/s throttle (with fio beside it), shuffled under a 20% cache budget,
# and warm shuffled. Needs root. Usage: sudo docs/study/larger-than-memory/direct.sh DATA_DIR OUT_DIR
set -euo pipefail
data=$1 out=$2
mkdir -p "$out"
r="$out/direct.jsonl"
common=(--data-dir "$data" --results "$r" -q --device cpu --format memmap)
python -m iobench limits --data-dir "$data" --results "$r"
python -m iobench limits --data-dir "$data" --results "$r" --read-limit 400
python -m iobench run "${common[@]}" --loader direct,tensorclass --no-shuffle --cache cold --read-limit 400 --runs 3
python scripts/bench_ceilings.py "$(ls "$data"/*/npy/features.npy | head -1)" --read-limit 400 --rounds 1 \
  | tee "$out/direct_fio_throttled.md"
python -m iobench run "${common[@]}" --loader direct,tensorclass,dataloader --batch-size 64 --max-seconds 5 \
  --cache cold --cache-budget 20% --runs 2
python -m iobench run "${common[@]}" --loader direct,tensorclass --batch-size 64 --cache cold --runs 2
python -m iobench run "${common[@]}" --loader direct,tensorclass,dataloader --cache warm --runs 3
python -m iobench report "$r" --out "$out/direct-report" >/dev/null
