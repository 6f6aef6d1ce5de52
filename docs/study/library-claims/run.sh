#!/usr/bin/env bash
# Lance, SPDL and Ray Data against their own claims on this machine: usage run.sh OUT (each configuration one run of
# 3 timed epochs after a warm-up, warm, shuffled unless said)
set -euo pipefail
out=$1; mkdir -p "$out"
work=$(mktemp -d); trap 'rm -rf -- "$work"' EXIT  # a fresh folder (0700), never a fixed name under /tmp
rows=$work/rows; images=$work/images
python -m iobench prepare --size 100000 --formats npy,arrow,litdata,lance --data-dir "$rows" -q
python -m iobench prepare --workload small-image --size 5000 --formats files,npy --data-dir "$images" -q
common=(--runs 1 --epochs 3 --cache warm --device cpu -q)
# Lance's random access (take of a shuffled batch) against Arrow, LitData and npy, each through its own library
python -m iobench sweep --data-dir "$rows" --format lance,arrow,litdata --loader native --num-workers 0 "${common[@]}" \
  --results "$out/random-access.jsonl"
python -m iobench sweep --data-dir "$rows" --format npy,lance,arrow --loader dataloader --num-workers 0 "${common[@]}" \
  --results "$out/random-access.jsonl"
# SPDL's thread pipeline against DataLoader workers and torchdata.nodes on PNG decoding with augmentation
python -m iobench sweep --data-dir "$images" --format files --loader dataloader,nodes,spdl --num-workers 2 \
  --transform augment "${common[@]}" --results "$out/decode.jsonl"
# Ray Data's streaming executor against Ray actors and DataLoader workers, per batch, on rows and on PNG decoding
python -m iobench sweep --data-dir "$rows" --format npy --loader dataloader,ray,ray-data --num-workers 1,2 \
  "${common[@]}" --results "$out/ray-data.jsonl"
python -m iobench sweep --data-dir "$images" --format files --loader dataloader,ray-data --num-workers 2 \
  --transform augment "${common[@]}" --results "$out/ray-data.jsonl"
# Lance's own client from object storage (S3 on loopback, 30 ms to the first byte, 90 MB/s a connection), cold,
# against Arrow (datasets' streaming), LitData's own s3:// path and npy's ranged reads through the DataLoader
remote=$work/remote
python -m iobench prepare --size 20000 --formats npy,arrow,litdata,lance --data-dir "$remote" -q
python -m iobench sweep --data-dir "$remote" --remote s3-like --format lance,arrow,litdata --loader native \
  --num-workers 0 --runs 1 --epochs 1 --cache cold --device cpu -q --results "$out/remote.jsonl"
python -m iobench sweep --data-dir "$remote" --remote s3-like --format npy,lance --loader dataloader \
  --num-workers 0 --runs 1 --epochs 1 --cache cold --device cpu -q --results "$out/remote.jsonl"
