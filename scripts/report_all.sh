#!/usr/bin/env bash
# Writes `iobench report` for every committed results file under OUT (one folder per file), so that a
# change meant to leave reports alone can be checked with `diff -r OUT_BEFORE OUT_AFTER`.
# Usage: bash scripts/report_all.sh OUT
set -euo pipefail
out=${1:?usage: report_all.sh OUT}
mkdir -p "$out"
failed=0
while read -r results; do
    slug=$(echo "${results%.jsonl}" | tr '/' '_')
    if ! log=$(python -m iobench report "$results" --out "$out/$slug" 2>&1); then
        echo "failed: $results"; echo "$log" | tail -3; failed=1
    fi
done < <(git ls-files 'docs/*.jsonl')
echo "reports under $out"
exit $failed
