#!/usr/bin/env bash
# scripts/gpu_smoke.sh across the device tool's calls: DALI's wheels travel in six parts, one a call, and the smoke
# runs meanwhile. Each call's command (the tool copies this working tree to the machine each time):
#
#   1. bash scripts/gpu_lease.sh start            carry .wheels: installs them, copies this tree to /tmp, starts the
#                                                 smoke there in a session of its own (it outlives the call)
#   2. bash scripts/gpu_lease.sh part part-00     carry .dali/part-00: copied to /tmp; the smoke's progress printed
#      ... one call a part ...
#   7. bash scripts/gpu_lease.sh finish part-05 S carry the last part: DALI installed, the smoke awaited (S seconds
#                                                 at most), the dali step run, everything packed into $OUT/gpu.tgz
# or, once the parts are there (part calls first, the first of them starting the machine), in one call:
#      bash scripts/gpu_lease.sh steps STEPS      carry .wheels: both installed, those steps run here, packed
set -uo pipefail
cd "$(dirname "$0")/.."
# fixed names (a later call finds them), kept only while they are this user's folders and not links: another user
# of a shared /tmp could plant one (the seventh probe's S2)
src=/tmp/iobench-src results=/tmp/iobench-gpu parts=/tmp/iobench-dali
for d in "$src" "$results" "$parts"; do
  if [ -L "$d" ] || { [ -e "$d" ] && { [ ! -d "$d" ] || [ ! -O "$d" ]; }; }; then
    echo "$d is not a folder of this user's (a link, a file or someone else's): remove it first" >&2; exit 1
  fi
done
progress() { cat "$results/steps.log" 2>/dev/null; tail -n 3 "$results/run.log" 2>/dev/null; }
pack() {  # what the device tool brings back: the folder whole, and the steps' lines beside it
  progress
  tar -czf "${OUT:?}/gpu.tgz" -C "$(dirname "$results")" "$(basename "$results")"
  cp "$results/steps.log" "$OUT/"
}
case "${1:?start, part FILE or finish FILE SECONDS}" in
  start)
    rm -rf "$src" && cp -a . "$src" && cd "$src" || exit 1
    bash scripts/gpu_wheels.sh --install || exit 1
    mkdir -p "$results"
    setsid nohup bash scripts/gpu_smoke.sh "$results" >"$results/run.log" 2>&1 </dev/null &
    echo $! >"$results/session"  # setsid's: the session's leader (a background job is no group leader: no fork)
    sleep 20
    progress ;;
  steps)
    rm -rf "$src" && cp -a . "$src" && cd "$src" || exit 1
    bash scripts/gpu_wheels.sh --install || exit 1
    bash scripts/gpu_wheels.sh --install-dali "$parts" || echo "DALI not installed: the dali step refuses"
    rm -rf "$results" && mkdir -p "$results"
    bash scripts/gpu_smoke.sh "$results" "${2:?STEPS}" >"$results/run.log" 2>&1
    pack ;;
  part)
    mkdir -p "$parts" && cp ".dali/$2" "$parts/" && ls -l "$parts"
    progress ;;
  finish)
    mkdir -p "$parts" && cp ".dali/$2" "$parts/"
    cd "$src" || exit 1
    bash scripts/gpu_wheels.sh --install-dali "$parts" >"$results/dali-install.log" 2>&1
    deadline=$(($(date +%s) + ${3:?seconds to wait for the smoke}))
    while [ ! -e "$results/DONE" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 5; done
    pkill -KILL -s "$(cat "$results/session")" || true  # what is still running when the wait ends
    bash scripts/gpu_smoke.sh "$results" dali >>"$results/run.log" 2>&1
    pack ;;
esac
