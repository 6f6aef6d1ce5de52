#!/usr/bin/env bash
# feed's answers as records, measured: resnet50 twice (compare), a --what-if, report, retinanet b200.
# Usage: run.sh DIR (a folder of yours: the datasets, records and report go there; nothing is removed). As root: cold.
set -uo pipefail
cd "${1:?a folder for the datasets and records}"
D=data
ib() { echo "== $(date +%T) iobench $*"; uptime; timeout 1500 python -m iobench "$@"; echo "rc=$?"; }
ib feed --workload resnet50 --accelerator h100 --size 20000 --format npy --data-dir $D --results feed.jsonl --what-if 51.5
ib feed --workload resnet50 --accelerator h100 --size 20000 --format npy --data-dir $D --results feed2.jsonl
ib compare feed.jsonl feed2.jsonl
ib report feed.jsonl --out report
ib feed --workload retinanet --accelerator b200 --size 6000 --format npy --data-dir $D --results retinanet.jsonl
echo "== done $(date +%T)"
