#!/usr/bin/env bash
# Every CUDA path of iobench on a lent GPU machine, as one prepared script: its steps in the order of what matters
# most, each under `timeout`, each step's output in OUT/STEP.log and its records in OUT/*.jsonl, one line a step in
# OUT/steps.log (rc and seconds), OUT/DONE at the end. A step that fails is recorded and the next one runs.
#
#   bash scripts/gpu_smoke.sh OUT [STEPS]        STEPS: comma list (default: every step but dali)
#
# env          the GPU, the CPU, torch, kvikio's mode (GDS or its compatibility mode), the disk's folder
# doctor       `doctor --device cuda`, `limits --device cuda` (the pinned host-to-device ceiling)
# crash        the crash matrix on cuda: every installed loader x core format, cold and cut short, 8 cases at a time
# preload      `--loader preload` and `--loader device-read`, cold and shuffled, against the disk's own O_DIRECT
#              sequential read of the same file (1.56 GB), alternating (scripts/bench_preload.py)
# photos       4,000 photo-like JPEGs (320-640 px), decoded in workers on the host against after the copy (nvJPEG)
# checkpoints  `checkpoint --device cuda`: every library's saves, restores onto the device warm and cold
# dali         `--loader dali` on the same photos, and DALI's own loop against it (scripts/bench_dali.py); needs DALI
#              (scripts/gpu_wheels.sh --dali, --install-dali)
# ranks        `run --nproc 1 --device cuda`: a rank joined through the store file (nccl), its record
# shared       `run`'s default comparison on the device quiet and beside as many busy loops as cores
#              (scripts/bench_shared_machine.py): whether it answers, and the quiet answer's choice
# rerun        `compare --rerun` on the device, quiet and beside as many busy loops as cores: a record against
#              itself (no change) and against a planted 1.2x slower step (found)
# smoke        the rest: pageable and blocking copies, workers, the prefetch thread's side stream, gpu-resident, a
#              training step, what-if, the profiler, ranks where there are two GPUs
#
# CK_PARAMS, CK_TRIALS, PRELOAD_ROUNDS and CRASH_SECONDS shorten it to a lease's minutes.
# DEVICE=cpu and SMALL=1 run the same steps on a machine without a GPU, small (a check of this script itself).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?OUT folder}
steps=${2:-env,doctor,crash,preload,photos,checkpoints,smoke}
device=${DEVICE:-cuda}
small=${SMALL:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
data=${DATA:-$(mktemp -d /tmp/iobench-gpu-data.XXXXXX)}  # a fresh folder unless named
preload_loaders=preload,device-read
[ "$device" = cpu ] && preload_loaders=preload  # device-read reads into device memory: CUDA only
mkdir -p "$data"  # doctor refuses a --data-dir that does not exist
export PYTHONUNBUFFERED=1 COLUMNS=160
if [ -n "$small" ]; then rows=2e4 preload_rows=2e5 photos=200 ck_params=2e6
else rows=2e5 preload_rows=3e6 photos=4000 ck_params=${CK_PARAMS:-1e8}; fi
ck_trials=${CK_TRIALS:-2} preload_rounds=${PRELOAD_ROUNDS:-3}

step() {  # step NAME SECONDS FUNCTION: its output in OUT/NAME.log, its rc and seconds in OUT/steps.log
  local name=$1 seconds=$2 start rc
  shift 2
  case ",$steps," in *",$name,"*) ;; *) return 0 ;; esac
  start=$(date +%s)
  echo "== $name ($(date -u +%H:%M:%S), at most $seconds s)" >&2
  timeout --kill-after=15 "$seconds" bash -c "$1" >>"$out/$name.log" 2>&1  # a function of this script, exported
  rc=$?
  echo "$name rc=$rc $(($(date +%s) - start)) s" | tee -a "$out/steps.log" >&2
}
iobench() { echo "+ iobench $*"; python -m iobench "$@"; }

env_step() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
  lscpu | grep -E "Model name|^CPU\(s\)"
  free -g | head -2
  findmnt -T "$data" -o TARGET,SOURCE,FSTYPE,OPTIONS || true
  python -m pip list 2>/dev/null | grep -i -E "^(typer|click|torch|numpy|kvikio|tensordict|nvidia-dali|safetensors) "
  python - <<'PY'
import torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, available {torch.cuda.is_available()}")
if torch.cuda.is_available():
    print(f"{torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")
try:
    import kvikio
    from iobench.loaders.device_read import kvikio_mode
    d = kvikio.defaults
    print(f"kvikio {kvikio.__version__}: {kvikio_mode(kvikio).value}; compat_mode setting "
          f"{d.get('compat_mode') if hasattr(d, 'get') else '?'}, compat preferred "
          f"{d.is_compat_mode_preferred() if hasattr(d, 'is_compat_mode_preferred') else '?'}")
except Exception as exc:  # recorded, not fatal: device-read then refuses in one line
    print(f"kvikio: {type(exc).__name__}: {exc}")
PY
}

doctor_step() {
  iobench doctor --device "$device" --data-dir "$data" --idle-seconds 0
  iobench prepare --size "$rows" --data-dir "$data/smoke" -q
  iobench limits --device "$device" --data-dir "$data/smoke" --results "$out/smoke.jsonl" --probe-size 256M
}

crash_step() {
  local core
  core=$(python -c "from iobench.formats import FORMATS; print(','.join(FORMATS.defaults))")
  python scripts/crash_matrix.py --data-dir "$data/crash" --size "$rows" --formats "$core" --modes cold,short \
    --device "$device" --jobs 8 --timeout 120 --out "$out/crash.jsonl"
}

preload_step() {
  python scripts/bench_preload.py --data-dir "$data/preload" --size "$preload_rows" --read-limit 0 \
    --reference odirect --device "$device" --loaders "$preload_loaders" --rounds "$preload_rounds" --results "$out/preload.jsonl"
}

photos_step() {
  python - "$data/jpegs" "$photos" <<'PY'
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image


def one(i: int) -> None:  # smooth gradients with noise: JPEG-like sizes, 320-640 x 240-480
    rng = np.random.default_rng(i)
    h, w = int(rng.integers(240, 481)), int(rng.integers(320, 641))
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // w), (y * 255 // h), ((x + y) * 255 // (w + h))], axis=-1)
    pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    folder = Path(sys.argv[1]) / "ab"[i % 2]
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(folder / f"{i:05d}.jpg", quality=90)


with ProcessPoolExecutor() as pool:
    list(pool.map(one, range(int(sys.argv[2])), chunksize=32))
PY
  iobench prepare --from "$data/jpegs" --formats files --files-encoding photos --shape 3,224,224 \
    --data-dir "$data/photos" -q
  local w
  for w in 8 16; do
    iobench run --data-dir "$data/photos" --format files --loader dataloader --device "$device" --runs 2 \
      --batch-size 128 --results "$out/photos.jsonl" -q --num-workers "$w" --decode-on host
  done
  for w in 4 8; do
    iobench run --data-dir "$data/photos" --format files --loader dataloader --device "$device" --runs 2 \
      --batch-size 128 --results "$out/photos.jsonl" -q --num-workers "$w" --decode-on device
  done
}

checkpoints_step() {
  iobench checkpoint --params "$ck_params" --device "$device" --rounds "$ck_trials" --save-mode inplace \
    --dir "$data/checkpoints" --results "$out/checkpoints.jsonl"
}

ranks_step() {
  iobench prepare --size "$rows" --data-dir "$data/smoke" -q
  iobench run --format memmap --loader tensorclass,dataloader --data-dir "$data/smoke" --device "$device" --runs 2 \
    --results "$out/ranks.jsonl" -q --nproc 1
}

shared_step() {
  python scripts/bench_shared_machine.py --device "$device" --trials 1 --busy "$(nproc)" --questions run \
    --size "$rows"
}

rerun_step() {
  python scripts/bench_shared_machine.py --device "$device" --trials "${RERUN_TRIALS:-3}" --busy "$(nproc)" \
    --questions rerun --size "${RERUN_SIZE:-1e6}" --keep "$out/rerun"
}

dali_step() {
  iobench run --data-dir "$data/photos" --format files --loader dali --device "$device" --runs 2 \
    --batch-size 128 --num-workers 12 --results "$out/photos.jsonl" -q
  python scripts/bench_dali.py "$data/photos"/* --device "$device" --threads 12 --batch-size 128 --rounds 3 --epochs 2
}

smoke_step() {
  local common=(--data-dir "$data/smoke" --device "$device" --runs 2 --results "$out/smoke.jsonl" -q)
  iobench run --format npy,memmap --loader dataloader "${common[@]}" --no-pin-memory --blocking
  iobench run --format npy,memmap --loader dataloader "${common[@]}" --num-workers 2 --pin-memory
  iobench run --format memmap --loader dataloader "${common[@]}" --prefetch-thread 4
  iobench run --format memmap --loader gpu-resident "${common[@]}"
  iobench run --format memmap --loader tensorclass "${common[@]}" --step mlp
  iobench run --format npy --loader dataloader "${common[@]}" --num-workers 2 --step sleep:4 --what-if 2,8 --min-au 0.9
  iobench run --format memmap --loader tensorclass "${common[@]}" --profile
  if [ "$(python -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
    iobench run --format memmap --loader tensorclass,dataloader "${common[@]}" --nproc 2
  fi
}

export out data device rows preload_rows photos ck_params ck_trials preload_rounds preload_loaders
export -f iobench env_step doctor_step crash_step preload_step photos_step checkpoints_step dali_step smoke_step \
  ranks_step shared_step rerun_step
step env 60 env_step
step doctor 120 doctor_step
step crash "${CRASH_SECONDS:-240}" crash_step
step preload 240 preload_step
step photos 240 photos_step
step ranks 120 ranks_step
step checkpoints 300 checkpoints_step
step shared "${SHARED_SECONDS:-300}" shared_step
step rerun "${RERUN_SECONDS:-420}" rerun_step
step dali 240 dali_step
step smoke 240 smoke_step
date -u >"$out/DONE"
