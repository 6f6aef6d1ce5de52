"""The same records get the same answer from every command (issue 79): the console's answer line, the report's Answer
section, `compare` and checkpoint's answer, fed the same files (quiet, busy, one run, a hostile record, kill losses),
print the judgement's one verdict; `report` refuses where `run` refuses. And nothing outside `iobench/judge/` computes
an interval, a ratio verdict or an answer."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from iobench.judge.answer import main_answer
from iobench.judge.checkpoints import checkpoint_answer
from iobench.report.answer import console_answer
from iobench.report.report import write_report
from iobench.results.checkpoint_summary import kill_counts, rows_of
from iobench.results.markdown import md_text
from iobench.results.record import RunRecord
from iobench.results.record_base import HostLoad
from tests.conftest import FLAT_RECORD, ROOT
from tests.judge.test_change import runs_record
from tests.results.test_checkpoint_summary import QUIET, _kills, _trials


def _configurations(busy: float, runs: int = 3) -> list[RunRecord]:
    """Three configurations of one pattern, far apart (4x, 2x, 1x) and each tight."""
    made = []
    for workers, rate in ((0, 1000.0), (1, 2000.0), (2, 4000.0)):
        medians = [rate, rate * 1.01, rate * 0.99][:runs]
        made.append(runs_record(medians, per_run=1 if runs == 1 else 3, busy=busy, num_workers=workers))
    return made


CASES = {
    "quiet": _configurations(0.0),
    "busy": _configurations(2.1),
    "one run": _configurations(0.0, runs=1),
}


def _write(path: Path, records: list[RunRecord], extra: str = "") -> Path:
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in records) + extra)
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_the_console_and_the_report_print_the_same_answer(tmp_path, case):
    records = CASES[case]
    judged = main_answer(records)
    console = console_answer(records)
    results = _write(tmp_path / "r.jsonl", records, extra='{"format": "npy", "samples_per_s": "NaN"}\nnot json\n')
    report = write_report(results, tmp_path / "out")[0].read_text()
    answer = report[report.index("## Answer") : report.index("## Where")]
    assert judged is not None and console.startswith(f"answer ({judged.pattern}): {judged.verdict()}")
    assert md_text(judged.verdict()) in answer
    if case == "busy":  # `run` refused to rank them, and so does the report (it named a winner "4.48x the next")
        assert "none: other programs used 2.1 cores" in console and "the next" not in answer
    elif case == "quiet":
        assert "use npy/dataloader (bs=16 w=2" in console and "2.00x the next" in answer
    else:
        assert "not settled" in console and "one of them has a single run: no interval" in answer


def test_compare_judges_the_same_files_by_the_same_rules(cli, tmp_path):
    quiet = _write(tmp_path / "quiet.jsonl", CASES["quiet"])
    later = [RunRecord.from_json({**r.to_json(), "timestamp": "2026-11-27T12:00:00+00:00"}) for r in CASES["busy"]]
    busy = _write(tmp_path / "busy.jsonl", later)
    r = cli("compare", quiet, busy)
    assert r.code == 0 and r.out.count("not comparable: other programs used") == 3 and "3 not comparable" in r.out
    again = [RunRecord.from_json({**r.to_json(), "timestamp": "2026-11-27T13:00:00+00:00"}) for r in CASES["busy"]]
    r = cli("compare", busy, _write(tmp_path / "busy2.jsonl", again))
    assert r.code == 0 and "3 no decidable difference" in r.out  # beside other programs, never a change


def test_the_checkpoint_answer_is_the_same_in_the_console_and_the_report(cli, tmp_path):
    busy = HostLoad(load_before=4.0, other_cpu_before=1.6, load_after=4.0, other_cpu_after=1.6)
    for host in (QUIET, busy):
        trials = _trials("torch", "inplace", [1.0, 1.0], [0.5, 0.5], host) + _trials(
            "safetensors", "inplace", [2.0, 2.0], [0.5, 0.5], host
        )
        losses = [_kills("torch", "inplace", N_intact=4, clean_error=1), _kills("safetensors", "inplace", N_intact=5)]
        said = checkpoint_answer(rows_of(trials), kill_counts(losses))  # what the session hands the console
        results = _write(tmp_path / "ck.jsonl", [*trials, *losses])
        r = cli("report", results, "--out", tmp_path / "ck")
        assert r.code == 0, r.err
        assert md_text(said) in (tmp_path / "ck" / "report.md").read_text()
        assert "left out: torch inplace, faster" in said


# ---- nothing outside the judgement judges ---------------------------------------------------------------------------

JUDGING_NAMES = {"median_interval", "BUSY_CORES"}  # the raw interval and the load threshold
JUDGING_METHODS = {"overlaps", "apart"}  # comparing two intervals is a verdict


def judging_outside(root: Path) -> list[str]:
    """Modules outside iobench/judge that compute an interval or a verdict themselves: they import the order-statistics
    interval or the load threshold, or compare two intervals."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "judge" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.alias) and node.name in JUDGING_NAMES:
                found.append(f"{path.relative_to(root)}: {node.name}")
            elif isinstance(node, ast.Name) and node.id in JUDGING_NAMES:
                found.append(f"{path.relative_to(root)}: {node.id}")
            elif isinstance(node, ast.Attribute) and node.attr in JUDGING_METHODS:
                found.append(f"{path.relative_to(root)}: .{node.attr}")
    return sorted(set(found))


def test_no_command_outside_the_judgement_computes_an_interval_or_a_verdict(tmp_path):
    assert judging_outside(ROOT / "iobench") == []
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "x.py").write_text("from iobench.judge.evidence import BUSY_CORES\nif a.overlaps(b): pass\n")
    assert judging_outside(tmp_path) == ["cli/x.py: .overlaps", "cli/x.py: BUSY_CORES"]  # the check can fail


FIGURES = {"median", "samples_per_s"}  # what a winner is picked by
# where a figure's own definition takes the least or the most (not a ranking of configurations)
DEFINITIONS = {
    "results/feed_record.py",  # a count's AU is its least fed rank's (MLPerf's rule: every rank's)
    "results/stats.py",  # one record's own epochs: an outlier, a slow first epoch (warnings' raw facts)
}


def _mentions_figure(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Attribute) and n.attr in FIGURES or isinstance(n, ast.Name) and n.id in FIGURES
        for n in ast.walk(node)
    )


def ranking_outside(root: Path) -> list[str]:
    """Modules outside iobench/judge that pick a winner by a figure themselves: `max`/`min` keyed by a median or
    samples/s, or two such figures compared (a figure against a constant, as a guard against 0, is no ranking)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if "judge" in rel.parts or rel.as_posix() in DEFINITIONS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min"):
                key = next((k.value for k in node.keywords if k.arg == "key"), None)
                if _mentions_figure(key) if key is not None else any(_mentions_figure(a) for a in node.args):
                    found.append(f"{rel}:{node.lineno}: {node.func.id}()")
            elif isinstance(node, ast.Compare) and not any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops
            ):
                sides = [node.left, *node.comparators]
                if sum(_mentions_figure(side) for side in sides) >= 2:
                    found.append(f"{rel}:{node.lineno}: comparison")
    return found


def test_no_module_outside_the_judgement_picks_a_winner_by_its_figure(tmp_path):
    """tune's "fastest at any shuffle" and its best by what loads, a report's fastest per format and a plot's best
    were each a bare max of medians outside the judgement (issue 93)."""
    assert ranking_outside(ROOT / "iobench") == []
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "x.py").write_text(
        "best = max(rs, key=lambda r: r.epochs.samples_per_s)\nif a.median > b.median: pass\nok = m if m > 0 else 0\n"
    )
    assert ranking_outside(tmp_path) == ["report/x.py:1: max()", "report/x.py:2: comparison"]  # it can fail


def test_a_hostile_record_is_skipped_and_changes_no_answer(tmp_path):
    records = CASES["quiet"]
    hostile = dict(FLAT_RECORD, samples_per_s=1e300, epoch_seconds=[-1.0, 0.0, float("nan")])
    results = _write(tmp_path / "r.jsonl", records, extra=json.dumps(hostile) + "\n")
    report = write_report(results, tmp_path / "out")[0].read_text()
    assert md_text(main_answer(records).verdict()) in report
