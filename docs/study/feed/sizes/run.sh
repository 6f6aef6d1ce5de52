#!/bin/bash
# unet3d_h100 on files: DLIO's sizes (a file a sample, 2 MiB handed over) against every sample the mean (147 MB handed
# over), alternating, cold (as root), two rounds. Datasets under a mkdtemp folder, removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data=$(mktemp -d /var/tmp/iobench-feed-sizes.XXXXXX)
trap 'rm -rf --one-file-system -- "$data"' EXIT
lscpu | grep "Model name"; uptime
for round in 1 2; do
  for kind in sizes mean; do
    if [ "$kind" = sizes ]; then fmt=(--format files); else fmt=(--format files --dataset feed-unet3d-28-mean); fi
    if [ "$kind" = mean ] && [ ! -d "$data/feed-unet3d-28-mean" ]; then
      iobench prepare --size 28 --shape 146600628 --dtype uint8 --classes 2 --format files --data-dir "$data" \
        --dataset feed-unet3d-28-mean --quiet
    fi
    echo "== round $round: $kind ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
    iobench feed --workload unet3d --accelerator h100 "${fmt[@]}" --data-dir "$data" \
      --results "$here/unet3d-files-$kind-$round.jsonl"
  done
done
uptime
