"""Regenerate every report of the study (docs/study/) from its records: `python scripts/regenerate_study.py`.

Each report is `iobench report RECORDS --out DIR` for the pairs below (the records a question's claims cite);
`--into TMP` writes them under TMP instead, to compare with what is committed, and `--only NAME` regenerates
one question's folder. A pair whose records are missing is an error: a report is never left without them."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "docs" / "study"

# (records, report folder), both relative to docs/study/
REPORTS = [
    ("accelerator-utilisation/results.jsonl", "accelerator-utilisation"),
    ("checkpoints/checkpoint-records.ndjson", "checkpoints/every-library-3.5gb-report"),
    ("checkpoints/dcp-variants-and-kills.ndjson", "checkpoints/report"),
    ("checkpoints/safe-kills-28mb.ndjson", "checkpoints/safe-kills-28mb-report"),
    ("checkpoints/safe-kills-1gib.ndjson", "checkpoints/safe-kills-1gib-report"),
    ("checkpoints/safe-cost-1gib.ndjson", "checkpoints/safe-cost-1gib-report"),
    ("dataloader-settings/results.jsonl", "dataloader-settings"),
    ("feature-rows/results.jsonl", "feature-rows"),
    ("gpu/gpu-smoke.jsonl", "gpu/report"),
    ("images/results.jsonl", "images/report"),
    ("images/png-encoding/results.jsonl", "images/png-encoding/report"),
    ("larger-than-memory/results.jsonl", "larger-than-memory/report"),
    ("library-claims/random-access.jsonl", "library-claims/random-access"),
    ("library-claims/decode.jsonl", "library-claims/decode"),
    ("library-claims/remote.jsonl", "library-claims/remote"),
    ("library-claims/ray-data.jsonl", "library-claims/ray-data"),
    ("larger-than-memory/direct.jsonl", "larger-than-memory/direct-report"),
    ("larger-than-memory/direct-bookkeeping/direct.jsonl", "larger-than-memory/direct-bookkeeping/direct-report"),
    ("larger-than-memory/direct-reads/direct.jsonl", "larger-than-memory/direct-reads/direct-report"),
    ("larger-than-memory/formats/formats.jsonl", "larger-than-memory/formats/formats-report"),
    ("object-storage/formats_100k.jsonl", "object-storage/formats_100k_report"),
    ("ranks-and-nodes/ray/results.jsonl", "ranks-and-nodes/ray"),
    ("ranks-and-nodes/torchrun/results.jsonl", "ranks-and-nodes/torchrun"),
    ("shard-formats/images-and-rows/results.jsonl", "shard-formats/images-and-rows/report"),
    ("shard-formats/images-and-rows/sequential.jsonl", "shard-formats/images-and-rows/report-sequential"),
    ("shard-formats/small-images/results.jsonl", "shard-formats/small-images/report"),
    ("shared-cores/results.jsonl", "shared-cores/report"),
    ("tune/results.jsonl", "tune"),
    ("your-pipeline/results.jsonl", "your-pipeline/report"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--into", type=Path, help="write the reports under this folder instead of docs/study/")
    parser.add_argument("--only", help="one question's folder (feature-rows, gpu, ...)")
    args = parser.parse_args(argv)
    pairs = [(r, o) for r, o in REPORTS if args.only is None or r.split("/")[0] == args.only]
    if not pairs:
        print(f"no report in {args.only!r}", file=sys.stderr)
        return 2
    for records, out in pairs:
        if not (STUDY / records).exists():
            print(f"{records}: no such records", file=sys.stderr)
            return 1
        target = (args.into or STUDY) / out
        source = (STUDY / records).relative_to(ROOT)  # as the report names it, wherever the checkout is
        done = subprocess.run(
            [sys.executable, "-m", "iobench", "report", str(source), "--out", str(target)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if done.returncode != 0:
            print(f"{records}: {done.stderr.strip()}", file=sys.stderr)
            return 1
        print(f"{records} -> {target.relative_to(args.into or STUDY)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
