"""The redesign changes where things are declared, not what is measured: fixed configurations run now store the
configuration fields they stored before it (tests/fixtures/configs-before-redesign.json, written by this file's
`write` at 8f65a9e, before the run options were declared once: `python tests/run/test_same_records.py OUT`), and a
sweep's and a tune's records the fields they stored before the sessions moved below the command line
(tests/fixtures/sweep-tune-before-sessions.json, written by `python tests/run/test_same_records.py --grids OUT` at
da0b69e)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BEFORE = ROOT / "tests" / "fixtures" / "configs-before-redesign.json"
GRIDS_BEFORE = ROOT / "tests" / "fixtures" / "sweep-tune-before-sessions.json"

# Each a run of its own over the same tiny dataset; what a record's configuration holds is compared, field by field
RUNS = {
    "defaults": "--format npy".split(),
    "every run option": "--format memmap --loader tensorclass --cache cold --eviction fadvise --transform augment "
    "--transform-on device --torch-threads 1 --cpu-contention 1 --no-shuffle".split(),
    "cpu transform, resume check": "--format npy --transform cpu:5 --resume-check --block-shuffle 4 --max-batches 3 "
    "--batch-size 64 --cache as-is --warmup 0".split(),
    "settings": "--format npy --num-workers 1 --prefetch-factor 3 --no-pin-memory --fetch item --seed 3 "
    "--epochs 2".split(),
}
COMMON = ["--runs", "1", "--quiet", "--device", "cpu"]
# what differs between two runs of one configuration, or between the machines that ran them
VARIES = {"timestamp"}


def configs(data_dir: Path, results: Path) -> dict[str, dict]:
    """Each run's record's configuration fields (RecordedConfig's), by the run's name."""
    from iobench.cli import main
    from iobench.results.record import RecordedConfig
    from iobench.settings import SETTINGS

    names = set(RecordedConfig.__dataclass_fields__) | set(SETTINGS)  # a record stores the settings in place
    found = {}
    for name, args in RUNS.items():
        out = results / f"{len(found)}.jsonl"
        try:
            main(["run", "--data-dir", str(data_dir), *args, *COMMON, "--results", str(out)])
        except SystemExit as done:
            assert done.code == 0, (name, done.code)
        stored = json.loads(out.read_text().splitlines()[-1])
        found[name] = {k: v for k, v in stored.items() if k in names and k not in VARIES}
    return found


# commands that write several records: every record's configuration, in a canonical order
GRIDS = {
    "sweep": "sweep --format npy,memmap --loader dataloader,tensorclass --batch-size 64,128 --num-workers 0,1 "
    "--cache warm,cold --runs 1 --quiet --device cpu".split(),
    "sweep settings preset": "sweep --preset settings --format npy --runs 1 --quiet --device cpu".split(),
    "tune": "tune --format npy --rounds 1 --budget-minutes 60 --batch-size 64 --quiet --device cpu "
    "--no-check-paste".split(),
}


def grid_configs(data_dir: Path, results: Path) -> dict[str, list[dict]]:
    """Each grid command's records' configuration fields, sorted (tune's candidates without torchdata's threads,
    which a machine has or not)."""
    import importlib.util

    from iobench.cli import main
    from iobench.results.record import RecordedConfig
    from iobench.settings import SETTINGS

    names = set(RecordedConfig.__dataclass_fields__) | set(SETTINGS)
    real = importlib.util.find_spec
    found = {}
    importlib.util.find_spec = lambda name, *a: None if name == "torchdata" else real(name, *a)
    try:
        for name, args in GRIDS.items():
            out = results / f"grid-{len(found)}.jsonl"
            try:
                main([*args, "--data-dir", str(data_dir), "--results", str(out)])
            except SystemExit as done:
                assert done.code == 0, (name, done.code)
            stored = [json.loads(line) for line in out.read_text().splitlines()]
            rows = [{k: v for k, v in r.items() if k in names and k not in VARIES} for r in stored]
            found[name] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))
    finally:
        importlib.util.find_spec = real
    return found


@pytest.mark.long
def test_a_sweep_and_a_tune_store_the_same_configurations(tmp_path):
    if not GRIDS_BEFORE.is_file():
        pytest.fail(f"{GRIDS_BEFORE} is missing: it is written once, by the code before the sessions moved")
    before = json.loads(GRIDS_BEFORE.read_text())
    now = grid_configs(prepared(tmp_path), tmp_path)
    assert set(now) == set(before)
    for name in GRIDS:
        assert now[name] == before[name], name


def prepared(root: Path) -> Path:
    from iobench.cli import main

    try:
        main(["prepare", "--size", "2000", "--data-dir", str(root / "data"), "--formats", "npy,memmap", "-q"])
    except SystemExit as done:
        assert done.code == 0
    return root / "data"


@pytest.mark.long
def test_the_same_runs_store_the_same_configurations(tmp_path):
    if not BEFORE.is_file():
        pytest.fail(f"{BEFORE} is missing: it is written once, by the code before the redesign")
    before = json.loads(BEFORE.read_text())
    now = configs(prepared(tmp_path), tmp_path)
    assert set(now) == set(before)
    for name in RUNS:
        changed = {
            k: (before[name].get(k), now[name].get(k))
            for k in before[name].keys() | now[name].keys()
            if before[name].get(k) != now[name].get(k)
        }
        assert not changed, (name, changed)


def write(out: Path) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out.write_text(json.dumps(configs(prepared(Path(tmp)), Path(tmp)), indent=1, sort_keys=True) + "\n")


def write_grids(out: Path) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out.write_text(json.dumps(grid_configs(prepared(Path(tmp)), Path(tmp)), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "--grids":
        write_grids(Path(sys.argv[2]))
    else:
        write(Path(sys.argv[1]))
