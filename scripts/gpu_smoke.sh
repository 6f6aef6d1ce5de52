#!/usr/bin/env bash
# Every CUDA path of iobench, in a few minutes, for the first machine with a GPU. No GPU has been
# lent to the project so far: these paths are written from the PyTorch documentation and exercised
# on the CPU only. Run it, keep its output, and report the figures (and any failure) in an issue.
#
#   bash scripts/gpu_smoke.sh [DATA_DIR]      (default: a fresh folder under /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-$(mktemp -d /tmp/iobench-gpu-smoke-XXXX)}
mkdir -p "$data"  # doctor refuses a --data-dir that does not exist
results="$data/results/gpu-smoke.jsonl"
run() { echo "+ iobench $*" >&2; python -m iobench "$@"; }

python - <<'PY'
import torch
assert torch.cuda.is_available(), f"no CUDA device (torch {torch.__version__}): this script needs a GPU"
print(f"{torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
PY
run doctor --device cuda --data-dir "$data" --idle-seconds 0
run prepare --size 2e5 --data-dir "$data" -q
run limits --device cuda --data-dir "$data" --results "$results" --probe-size 256M
common=(--data-dir "$data" --device cuda --runs 2 --results "$results" -q)
# Every format prepare writes by default (the others need their libraries, which the GPU machine lacks) and every
# loader, cold and warm; pinned and pageable; blocking and not.
core=$(python -c "from iobench.formats import FORMATS; print(','.join(FORMATS.defaults))")
run run --format $core --loader all "${common[@]}" --cache warm
run run --format $core --loader all "${common[@]}" --cache cold
run run --format npy,memmap --loader dataloader "${common[@]}" --no-pin-memory --blocking
run run --format npy,memmap --loader dataloader "${common[@]}" --num-workers 2 --pin-memory
run run --format memmap --loader tensorclass "${common[@]}" --num-workers 2 --no-shuffle
# The CUDA side stream of the prefetch thread, the resident loader, a real training step, AU and what-if.
run run --format memmap --loader dataloader "${common[@]}" --prefetch-thread 4
run run --format memmap --loader gpu-resident "${common[@]}"
# Issue 61's paths: the dataset read whole (into pinned memory, or by cuFile into device memory) inside a cold first
# epoch, beside the loaders that fault pages in; photos decoded after the copy (nvJPEG) beside decoding in workers.
run run --format npy,memmap --loader preload,device-read,direct,dataloader "${common[@]}" --cache cold
python - "$data/jpegs" <<'PY'
import sys
from pathlib import Path

import numpy as np
from PIL import Image

rng = np.random.default_rng(0)
for i in range(2000):  # smooth gradients with noise: JPEG-like sizes, 320-640 x 240-480 as the issue's photos
    h, w = int(rng.integers(240, 481)), int(rng.integers(320, 641))
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // w), (y * 255 // h), ((x + y) * 255 // (w + h))], axis=-1)
    pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    folder = Path(sys.argv[1]) / "ab"[i % 2]
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(folder / f"{i:05d}.jpg", quality=90)
PY
run prepare --from "$data/jpegs" --formats files --files-encoding photos --shape 3,224,224 --data-dir "$data/photos" -q
for where in host device; do
    run run --data-dir "$data/photos" --format files --loader dataloader --device cuda --runs 2 --results "$results" \
        -q --num-workers 4 --decode-on "$where"
done
run run --format memmap --loader tensorclass "${common[@]}" --step mlp
run run --format npy --loader dataloader "${common[@]}" --num-workers 2 --step sleep:4 --what-if 2,8 --min-au 0.9
run run --format memmap --loader tensorclass "${common[@]}" --profile
# Ranks: nccl on cuda:LOCAL_RANK, one record for all.
gpus=$(python -c "import torch; print(torch.cuda.device_count())")
if [ "$gpus" -ge 2 ]; then
    run run --format memmap --loader tensorclass,dataloader "${common[@]}" --nproc 2
fi
# From object storage to the GPU: rclone serve s3 on loopback read through --endpoint-url (no shaper there), on a
# dataset of its own: shuffled rows are a GET each, and 200,000 of them ran past the device tool's 10 minutes.
run prepare --size 2e4 --formats npy,memmap --data-dir "$data/remote" -q
bash scripts/remote_smoke.sh "$data/remote" cuda "$results"
# Checkpoints restored onto the device (copied into a state made there, as load_state_dict does), cold and warm.
run checkpoint --params 2.5e8 --device cuda --trials 2 --dir "$data/checkpoints" --results "$data/results/checkpoints.jsonl"
run report "$data/results/checkpoints.jsonl" --out "$data/checkpoint-report"
run report "$results" --out "$data/report"
echo "records in $results; report in $data/report/report.md" >&2
