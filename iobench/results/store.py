"""Result records: one flat JSON object per run, appended to a JSONL file, and their summaries."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterable
from pathlib import Path

from iobench.errors import IobenchError
from iobench.run.clocks import EpochTiming


def epoch_metrics(timings: list[EpochTiming], sample_bytes: int) -> dict:
    """Flat, self-explaining metrics over the timed epochs (median with min and max)."""
    seconds = [t.seconds for t in timings]
    median = statistics.median(seconds)
    samples = statistics.median([t.samples for t in timings])
    batches = sum(t.batches for t in timings) or 1
    mean = statistics.fmean(seconds)
    cv = statistics.pstdev(seconds) / mean if len(seconds) > 1 and mean > 0 else 0.0
    return {
        "epoch_seconds": seconds,
        "epoch_seconds_median": median,
        "epoch_seconds_min": min(seconds),
        "epoch_seconds_max": max(seconds),
        "epoch_seconds_cv": cv,
        "epoch_seconds_mad": statistics.median(abs(x - median) for x in seconds),
        "first_batch_seconds": [t.first_batch_seconds for t in timings],
        "first_batch_seconds_median": statistics.median(t.first_batch_seconds for t in timings),
        "samples_per_epoch": int(samples),
        "batches_per_epoch": int(statistics.median(t.batches for t in timings)),
        "samples_per_s": samples / median if median > 0 else float("nan"),
        "mb_per_s": samples * sample_bytes / 1e6 / median if median > 0 else float("nan"),
        "wait_ms_per_batch": 1000 * sum(t.wait_seconds for t in timings) / batches,
        "h2d_ms_per_batch": 1000 * sum(t.h2d_seconds for t in timings) / batches,
        "step_ms_per_batch": 1000 * sum(t.step_seconds for t in timings) / batches,
        "partial": any(t.partial for t in timings),
    }


def append_record(path: Path, record: dict) -> None:
    """Append one line and fsync it: a crash later in a sweep never loses finished runs."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise IobenchError(f"cannot write results to {path}: {exc.strerror or exc}") from None


def read_records(path: Path) -> list[dict]:
    if not path.is_file():
        raise IobenchError(f"{path}: no such results file")
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    raise IobenchError(f"{path}:{number}: not a JSON record") from None
    return records


def relative_to_fastest(records: Iterable[dict]) -> list[float]:
    """Each record's median epoch time over the fastest's (1.0 = fastest)."""
    records = list(records)
    best = min(r["epoch_seconds_median"] for r in records)
    return [r["epoch_seconds_median"] / best for r in records]
