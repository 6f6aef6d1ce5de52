#!/usr/bin/env bash
# `iobench run` on several machines at once, through torchrun's c10d rendezvous.
#
# Start this script on every node with the same NNODES, RDZV_ENDPOINT and JOB_ID; the arguments
# are `iobench run`'s. Every node must hold the same prepared dataset at the same --data-dir (run
# `iobench prepare` on each, or use a shared file system). Rank 0 writes the one record.
#
#   NNODES=2 RDZV_ENDPOINT=node0:29400 scripts/launch_multinode.sh --format memmap --loader tensorclass
#
# NNODES          number of machines (required)
# RDZV_ENDPOINT   host:port of one of them, reachable from all (required; the port must be free there)
# NPROC_PER_NODE  processes per machine (default: its GPUs, or 1 without any)
# JOB_ID          rendezvous id shared by the nodes of one run (default: iobench)
# PYTHON          interpreter that has iobench installed (default: python3)
set -euo pipefail
: "${NNODES:?set NNODES to the number of machines}"
: "${RDZV_ENDPOINT:?set RDZV_ENDPOINT to host:port of one node, reachable from every node}"
PYTHON=${PYTHON:-python3}
if [[ -z "${NPROC_PER_NODE:-}" ]]; then
    NPROC_PER_NODE=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count() or 1)')
fi
exec "$PYTHON" -m torch.distributed.run \
    --nnodes "$NNODES" \
    --nproc-per-node "$NPROC_PER_NODE" \
    --rdzv-backend c10d \
    --rdzv-endpoint "$RDZV_ENDPOINT" \
    --rdzv-id "${JOB_ID:-iobench}" \
    -m iobench run "$@"
