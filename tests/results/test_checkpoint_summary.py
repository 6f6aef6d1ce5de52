"""What checkpoint records sum up to per library and save mode (the rows the answer is judged from, and the kill
counts); the records' makers here serve the judgement's tests (tests/judge/test_checkpoints.py) and the report's."""

from __future__ import annotations

from iobench.results.checkpoint_record import KILL_OUTCOMES, CheckpointKills, CheckpointTrial
from iobench.results.checkpoint_summary import kill_counts, lost, rows_of
from iobench.results.record_base import HostLoad

QUIET = HostLoad(load_before=0.1, other_cpu_before=0.0, load_after=0.1, other_cpu_after=0.0)


def _trials(library: str, mode: str, durable: list[float], cold: list[float], host: HostLoad = QUIET) -> list:
    made = []
    for k, (d, c) in enumerate(zip(durable, cold, strict=True)):
        common = {
            "library": library,
            "params": 10**6,
            "state_bytes": 14 * 10**6,
            "bytes_on_disk": 14 * 10**6,
            "trial": k,
            "save_mode": mode,
            "host": host,
        }
        made.append(
            CheckpointTrial(op="save", seconds=d / 2, durable_seconds=d, first_durable_seconds=d * 1.5, **common)
        )
        made.append(CheckpointTrial(op="restore", cache="cold", seconds=c, exact=True, **common))
    return made


def _kills(library: str, mode: str, **counts: int) -> CheckpointKills:
    full = {o: 0 for o in KILL_OUTCOMES} | {o.replace("_", " ").replace("N1", "N+1"): n for o, n in counts.items()}
    return CheckpointKills(library=library, save_mode=mode, params=10**6, kills=sum(full.values()), counts=full)


def test_rows_are_medians_of_the_rounds_and_kills_are_summed_per_library_and_mode():
    rows = rows_of(_trials("torch", "safe", [1.0, 3.0, 2.0], [1.0, 1.2, 1.1]))
    assert [(r.label, r.durable_s, r.cold_s) for r in rows] == [("torch safe", 2.0, 1.1)]
    kills = kill_counts([_kills("torch", "safe", N_intact=2, clean_error=1), _kills("torch", "safe", N1_intact=3)])
    assert lost(kills[("torch", "safe")]) == 1 and sum(kills[("torch", "safe")].values()) == 6
