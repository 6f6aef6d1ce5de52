#!/usr/bin/env bash
# The "real workloads" figures of docs/study.md: small-image (20,000 samples) and image (2,000), batch 64, with
# --transform augment, every format including files, shuffled, cold and warm, 0/1/2 DataLoader
# workers; Ray actors against DataLoader workers; host against device transforms; no transform (the
# format and the decode alone); and one --from run on real photos (photos.py).
# Needs root for cold epochs (drop_caches). Usage: sudo docs/study/images/run.sh DATA_DIR OUT_DIR
set -euo pipefail
data=$1 out=$2
mkdir -p "$out"
r="$out/results.jsonl"
python -m iobench prepare --workload small-image --size 20000 --formats all --data-dir "$data" -q
python -m iobench prepare --workload image --size 2000 --formats all --data-dir "$data" -q
python -m iobench limits --data-dir "$data/n20000_3x32x32_uint8_photo_c1000_s0" --results "$r"
all=npy,hdf5,lmdb,memmap,files
for ds in n20000_3x32x32_uint8_photo_c1000_s0 n2000_3x224x224_uint8_photo_c1000_s0; do
  common=(--data-dir "$data" --dataset "$ds" --results "$r" --runs 2 -q --device cpu)
  bs=(--batch-size 64)
  # format and decode alone, then the training recipe on the host with 0/1/2 workers, warm and cold
  python -m iobench run --format $all --loader dataloader "${common[@]}" "${bs[@]}"
  python -m iobench run --format memmap --loader tensorclass "${common[@]}" "${bs[@]}"
  for cache in warm cold; do
    for w in 0 1 2; do
      [[ $ds == n2000_* && $w == 1 ]] && continue  # one worker: small-image shows it; saves 12 minutes
      python -m iobench run --format $all --loader dataloader --transform augment --num-workers $w \
        --cache $cache "${common[@]}" "${bs[@]}"
      python -m iobench run --format memmap --loader tensorclass --transform augment --num-workers $w \
        --cache $cache "${common[@]}" "${bs[@]}"
    done
  done
  # tensordict's recipe: pre-decoded memmap, transform batched after the copy
  python -m iobench run --format memmap --loader tensorclass,dataloader --transform augment \
    --transform-on device "${common[@]}" "${bs[@]}"
  python -m iobench run --format files --loader dataloader --transform augment --transform-on device \
    "${common[@]}" "${bs[@]}"
  # Ray actors against DataLoader workers, same transform
  for w in 1 2; do
    python -m iobench run --format files,npy --loader ray --num-workers $w --transform augment \
      "${common[@]}" "${bs[@]}"
  done
done
# real photos: 320 JPEG crops of scikit-image's and scikit-learn's sample photos
python docs/study/images/photos.py "$data/photos-src" >/dev/null
python -m iobench prepare --from "$data/photos-src" --shape 3,128,128 --formats all --data-dir "$data" -q
common=(--data-dir "$data" --dataset photos-src_n320_3x128x128_uint8_c8 --results "$r" --runs 3 -q --device cpu)
for w in 0 2; do
  python -m iobench run --format $all --loader dataloader --transform augment --num-workers $w --batch-size 32 \
    "${common[@]}"
done
python -m iobench report "$r" --out "$out/report" >/dev/null
