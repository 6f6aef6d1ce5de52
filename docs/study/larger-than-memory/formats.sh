#!/usr/bin/env bash
# Larger than memory, every format: npy, HDF5 and LMDB through the DataLoader and memmap through the
# direct loader and tensorclass, on the 2e6-sample dataset of run.sh (HDF5 and LMDB added to it), cold,
# page cache unlimited, capped at 20% and at 5%, sequential and shuffled; and `files` (one file per
# sample) on a 2e5-sample dataset of the same kind (2e6 files would take longer to write than the study).
# Epochs are cut at 15 s (sequential) and 5 s (shuffled): rates and bytes read per byte delivered, not
# whole-epoch times. Needs root. Usage: sudo docs/study/larger-than-memory/formats.sh DATA_DIR OUT_DIR
set -euo pipefail
data=$1 out=$2
mkdir -p "$out"
r="$out/formats.jsonl"
big=n2000000_128_float32_c1000_s0 small=n200000_128_float32_c1000_s0
for f in npy memmap hdf5 lmdb; do  # the formats run.sh's dataset lacks
  [[ -d "$data/$big/$f" ]] || python -m iobench prepare --size 2e6 --shape 128 --data-dir "$data" --formats "$f" -q
done
[[ -d "$data/$small/files" ]] || python -m iobench prepare --size 2e5 --shape 128 --data-dir "$data" --formats files -q
python -m iobench limits --data-dir "$data/$big" --results "$r"
common=(--data-dir "$data" --results "$r" --cache cold --runs 2 -q --device cpu)
for budget in none 20% 5%; do
  b=(); [[ $budget == none ]] || b=(--cache-budget "$budget")
  seq=(--no-shuffle --max-seconds 15 "${common[@]}" "${b[@]}")
  shuf=(--batch-size 64 --max-seconds 5 "${common[@]}" "${b[@]}")
  python -m iobench run --dataset "$big" --format npy,hdf5,lmdb --loader dataloader "${seq[@]}"
  python -m iobench run --dataset "$big" --format memmap --loader direct "${seq[@]}"
  python -m iobench run --dataset "$big" --format npy,hdf5,lmdb --loader dataloader "${shuf[@]}"
  python -m iobench run --dataset "$big" --format memmap --loader direct,tensorclass "${shuf[@]}"
  # The disk's speed moves by up to 2x between minutes: the ceilings are measured again beside every
  # budget's runs, each kept at its best (a loader's good minute must not beat a ceiling's bad one).
  python -m iobench limits --data-dir "$data/$big" --results "$r" --keep-best
  # 5% of the files dataset (6 MiB) is below the 16 MiB floor every budgeted run needs: refused, not run
  [[ $budget == 5% ]] && continue
  python -m iobench run --dataset "$small" --format files --loader dataloader "${seq[@]}"
  python -m iobench run --dataset "$small" --format files --loader dataloader "${shuf[@]}"
done
python -m iobench report "$r" --out "$out/formats-report" >/dev/null
