"""The eleventh part's table from its records: each format and path, shuffled and in storage order, under each
profile, with 0 and 2 workers; `*` marks an epoch cut at --max-seconds (the rate of what it read). The columns
after the rates are s3-like's with no workers: GETs (+HEADs) in the epoch, bytes the server sent per byte of rows
delivered, time to the first batch, the library's local cache at its peak, and the shuffle's quality; with
remote_limits.json beside it, the rate as a share of the profile's ceiling for GETs of one sample each (measured
with 256 connections), the ceiling of the readers that make a GET per sample (only theirs).

Usage: python docs/study/object-storage/orders_table.py \
    docs/study/object-storage/formats_100k_orders.jsonl [remote_limits.json]
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

PROFILES = ("s3-like", "express-like")
WORKERS = (0, 2)


def path_of(r: dict) -> str:
    threads = f", {r['fetch_threads']} fetch threads" if r.get("fetch_threads", 1) > 1 else ""
    return f"{r['format']} {r['loader']}{threads}"


def rate(r: dict | None) -> str:
    if r is None:
        return "-"
    return f"{r['samples_per_s']:,.0f}{'*' if r['partial'] else ''}"


def moved(r: dict) -> str:
    """The server's bytes over the rows' bytes delivered, in the record's first timed epoch."""
    sent = (r.get("device_read_bytes") or [None])[0]
    delivered = r["samples_per_s"] * r["epoch_seconds"][0] * r["sample_bytes"]
    return f"{sent / delivered:,.2f}" if sent and delivered else "-"


def gets(r: dict | None) -> str:
    if r is None:
        return "-"
    by = r["requests_by_method"]
    return f"{by.get('GET', 0):,} (+{by.get('HEAD', 0)})"


def first_batch(r: dict) -> str:
    return f"{r['first_batch_seconds'][0]:.2f}"


def cache_peak(r: dict) -> str:
    peaks = [p for p in r.get("library_cache_peak_bytes") or [] if p is not None]
    return f"{max(peaks) / 1e6:,.1f} MB" if peaks else "none"


def get_shares(r: dict, gets_per_s: dict[str, float]) -> str:
    """The rate against the profile's sample-GET ceiling, for a reader that makes a GET per sample or more (the
    others read whole objects or large ranges: that ceiling is not theirs)."""
    ceiling = gets_per_s.get(r["remote_profile"])
    delivered = r["samples_per_s"] * r["epoch_seconds"][0]
    if not ceiling or r["requests_by_method"].get("GET", 0) < 0.5 * delivered:
        return "-"
    return f"{100 * r['samples_per_s'] / ceiling:.0f}%"


def table(cells: dict[str, dict[tuple, dict]], shuffled: bool, gets_per_s: dict[str, float]) -> None:
    columns = [(p, w) for p in PROFILES for w in WORKERS]
    head = ["format, loader"] + [f"{p}, {w} workers" for p, w in columns]
    head += ["GETs (+HEADs)", "bytes moved per byte", "first batch s", "local cache peak", "shuffle spread/order"]
    if gets_per_s:
        head += ["of the sample-GET ceiling, 2 workers (s3 / express)"]
    print(f"\n{'Shuffled' if shuffled else 'In storage order'}, samples/s:\n")
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    ranked = sorted(cells.items(), key=lambda kv: -(kv[1].get((shuffled, "s3-like", 0)) or {}).get("samples_per_s", 0))
    for name, by in ranked:
        first = by.get((shuffled, "s3-like", 0))
        row = [name] + [rate(by.get((shuffled, p, w))) for p, w in columns]
        row += (
            [
                gets(first),
                moved(first),
                first_batch(first),
                cache_peak(first),
                f"{first['shuffle_spread']:.2f}/{first['shuffle_order']:.2f}",
            ]
            if first
            else ["-"] * 5
        )
        if gets_per_s:
            two = [by.get((shuffled, p, 2)) for p in PROFILES]
            row += [" / ".join(get_shares(r, gets_per_s) if r else "-" for r in two)]
        print("| " + " | ".join(row) + " |")


def sample_get_ceilings(path: str | None) -> dict[str, float]:
    """GETs/s of one sample each with N connections, by profile name, from `limits --remote`'s file: measure it
    with more connections than any run keeps in flight (2 workers x 64 GETs: --connections 256)."""
    if path is None:
        return {}
    entries = json.loads(Path(path).read_text()).values()
    return {e["profile"]: e["shaped"]["gets_sample_n"] for e in entries}


def main(path: str, limits: str | None = None) -> None:
    records = [json.loads(line) for line in open(path) if line.strip()]
    gets_per_s = sample_get_ceilings(limits)
    cells: dict[str, dict[tuple, dict]] = defaultdict(dict)
    for r in records:
        cells[path_of(r)][(r["shuffle"], r["remote_profile"], r["num_workers"])] = r
    print(f"Sample-GET ceilings: {gets_per_s}" if gets_per_s else "")
    table(cells, True, gets_per_s)
    table(cells, False, gets_per_s)
    loads = [r["load_before"] for r in records]
    print(
        f"\n{len(records)} records; load_before {min(loads):.1f}-{max(loads):.1f}; {records[0]['cpu_model']}, "
        f"{records[0]['cpu_count']} cores; git {sorted({r['git_sha'][:7] for r in records})}"
    )


if __name__ == "__main__":
    main(*sys.argv[1:3])
