#!/usr/bin/env bash
# Run a command (torchrun with its ranks, or several iobench processes) inside one cgroup with a read
# throttle and a fixed memory limit, for what `--read-limit`/`--cache-budget` cannot do per process.
# The memory limit here covers the processes' own memory too: give it their RSS plus the cache wanted.
#   sudo scripts/confine.sh --read-limit 400 --memory 2G -- torchrun --nproc-per-node 2 -m iobench run ...
set -euo pipefail
read_limit="" memory=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --read-limit) read_limit="$2"; shift 2 ;;
    --memory) memory="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "confine.sh: unknown option $1 (--read-limit MB/s, --memory SIZE, -- command)" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] || { echo "confine.sh: give a command after --" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "confine.sh: needs root (sudo)" >&2; exit 2; }
bytes() { numfmt --from=iec "${1^^}"; }
disk=$(lsblk -no PKNAME "$(df --output=source . | tail -1)" 2>/dev/null || true)
dev=$(cat "/sys/class/block/${disk:-$(basename "$(df --output=source . | tail -1)")}/dev")
name="iobench-confine-$$"
if [[ -d /sys/fs/cgroup/blkio || -d /sys/fs/cgroup/memory ]]; then  # cgroup v1
  if [[ -n $read_limit ]]; then
    mkdir -p "/sys/fs/cgroup/blkio/$name"
    echo "$dev $((read_limit * 1000000))" > "/sys/fs/cgroup/blkio/$name/blkio.throttle.read_bps_device"
    echo $$ > "/sys/fs/cgroup/blkio/$name/cgroup.procs"
  fi
  if [[ -n $memory ]]; then
    mkdir -p "/sys/fs/cgroup/memory/$name"
    bytes "$memory" > "/sys/fs/cgroup/memory/$name/memory.limit_in_bytes"
    echo $$ > "/sys/fs/cgroup/memory/$name/cgroup.procs"
  fi
else  # cgroup v2
  mkdir -p "/sys/fs/cgroup/$name"
  [[ -z $read_limit ]] || echo "$dev rbps=$((read_limit * 1000000))" > "/sys/fs/cgroup/$name/io.max"
  [[ -z $memory ]] || bytes "$memory" > "/sys/fs/cgroup/$name/memory.max"
  echo $$ > "/sys/fs/cgroup/$name/cgroup.procs"
fi
echo "confine.sh: running in cgroup $name (read limit ${read_limit:-none} MB/s, memory ${memory:-unlimited}, disk $dev)" >&2
exec "$@"
