"""Each kept feed answer judged again by this iobench's judgement: per count its AU as measured -> as judged, the
verdict's letter (fed, starved, undecided), and the raw waits the judgement credits (the step loops' wait for a CPU
`lw`, their time on one `cpu`, the mean loader worker's wait `ww`, each the most of any rank and epoch, a share of
the epoch) with the cores other programs used (`o`). Reads the records `bench_shared_machine.py --keep` wrote.

    python scripts/rejudge_feed.py FOLDER > judged.txt
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from iobench.judge.feed import fed_count, feed_verdict, judged_au
from iobench.results.feed_record import FeedPoint, FeedRecord


def _most(rows: tuple[tuple[float, ...], ...]) -> str:
    return f"{max(x for r in rows for x in r):.3f}" if rows else "-"


def _count(p: FeedPoint, threshold: float) -> str:
    judged = judged_au(p)
    said = f"{judged:.3f}" if judged is not None else "-"
    return (
        f"{p.n}:{p.au:.3f}->{said}/{feed_verdict(p, threshold)[0]} lw{_most(p.rank_loop_wait)} "
        f"cpu{_most(p.rank_loop_cpu)} ww{_most(p.rank_worker_wait)} o{p.others_cores or 0.0:.2f}"
    )


def main() -> None:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        raise SystemExit("usage: rejudge_feed.py FOLDER (bench_shared_machine.py --keep's)")
    kept = [p for p in Path(sys.argv[1]).glob("feed-*-*.jsonl") if not p.stem.endswith("-runs")]
    for path in sorted(kept, key=lambda p: (int(p.stem.split("-")[1]), p.stat().st_mtime)):
        _, trial, condition = path.stem.split("-", 2)
        for line in path.read_text().splitlines():
            record = FeedRecord.from_json(json.loads(line))
            counts = record.point_map()
            said = " ".join(_count(p, record.threshold) for _, p in sorted(counts.items()))
            print(f"{int(trial) + 1} {condition} {fed_count(counts, record.threshold, record.rules)} | {said}")


if __name__ == "__main__":
    main()
