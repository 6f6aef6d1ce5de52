#!/usr/bin/env bash
# The formats people choose today on the other workloads, larger than memory and with augmentation (the
# rest of the formats study; docs/study/shard-formats/small-images is the small-image part). Every format through the
# DataLoader, the five new ones through their own pipelines (--loader native), tensorclass on memmap;
# shuffled, batch 256, two runs each:
#   image (3x224x224 uint8 photos, 2,000) and tabular (128 float32, 50,000): warm and cold, 0 and 2 workers;
#   a page-cache budget of 20% of each format's files (small-image 8e4 and image 4e3, 0 workers): the steady
#     state of repeated epochs over a dataset five times the memory it may use (warm-up epoch, then timed;
#     tabular's 26 MB would give a budget under the 16 MiB floor);
#   --transform augment (crop, flip, normalise) on image, warm, 0 and 2 workers.
# Cold and the budget need root (drop_caches, memory cgroups). Usage: sudo run.sh DATA_DIR OUT_DIR
set -euo pipefail
data=$1 out=$2
mkdir -p "$out"
r="$out/results.jsonl"
python -m iobench prepare --size 2e3 --workload image --data-dir "$data/image" --formats all -q
python -m iobench prepare --size 5e4 --workload tabular --data-dir "$data/tabular" --formats all -q
python -m iobench prepare --size 4e3 --workload image --data-dir "$data/image-4e3" --formats all -q
python -m iobench prepare --size 8e4 --workload small-image --data-dir "$data/small-image" --formats all -q
python -m iobench limits --data-dir "$data/image" --results "$r" --probe-size 256M
all=npy,hdf5,lmdb,memmap,files,webdataset,arrow,zarr,tfrecord,litdata
new=webdataset,arrow,zarr,tfrecord,litdata
common=(--results "$r" --runs 2 -q --device cpu --batch-size 256)
each() {  # each DATA_DIR ARGS...: every format through the DataLoader, the new ones natively, tensorclass
  local d=$1; shift
  python -m iobench run --format "$all" --loader dataloader --data-dir "$d" "${common[@]}" "$@"
  python -m iobench run --format "$new" --loader native --data-dir "$d" "${common[@]}" "$@"
  python -m iobench run --format memmap --loader tensorclass --data-dir "$d" "${common[@]}" "$@"
}
for workload in image tabular; do
  for cache in warm cold; do
    for w in 0 2; do
      each "$data/$workload" --cache "$cache" --num-workers "$w"
    done
  done
done
# A budget must also hold the batches in flight (the run refuses one that cannot): 8e4 small images (20% of
# their PNG files is 32 MB), and 4e3 images at batch 32 (20% of 2e3 PNG-compressed ones is too little)
# Each epoch is cut at 5 s (the record says partial): a shuffled epoch under a budget re-reads what read-ahead
# brought in and the budget evicted (seen: 1.5 GB/s from disk for a 246 MB format, npy unfinished in 16 min)
each "$data/small-image" --cache warm --cache-budget 20% --num-workers 0 --max-seconds 5
each "$data/image-4e3" --cache warm --cache-budget 20% --num-workers 0 --batch-size 32 --max-seconds 5
for w in 0 2; do
  each "$data/image" --cache warm --transform augment --num-workers "$w"
done
python -m iobench limits --data-dir "$data/image" --results "$r" --probe-size 256M --keep-best
python -m iobench report "$r" --out "$out/report" >/dev/null
for workload in image tabular small-image image-4e3; do
  python -m iobench info --data-dir "$data/$workload"
done > "$out/info.txt"
