"""The study as answers (docs/study.md): every link resolves, every question's folder says its question, command,
machine and claims, no folder is named after the history of the work, and every figure quoted beside a link to a
folder is found in that folder's records (a number read back from them, not checked by eye)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

STUDY = ROOT / "docs" / "study"
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
PAGES += sorted(STUDY.rglob("README.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
HISTORY = re.compile(r"first-attempt|after-|-fix|-final|^new-|^aio|-old|-v\d")
# a figure as the study quotes it: 2,293 MB/s, 1,614 rows/s (ranges: 940-960 MB/s)
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(?:-(\d[\d,]*(?:\.\d+)?))? (samples/s|rows/s|images/s|MB/s)\b")


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return [t for t in LINK.findall(text) if not t.startswith(("http://", "https://", "#", "mailto:"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page):
    missing = [t for t in links(page) if not (page.parent / t.split("#")[0]).exists()]
    assert missing == []


def test_every_question_has_its_folder_and_readme():
    folders = [p for p in STUDY.iterdir() if p.is_dir()]
    assert folders
    for folder in folders:
        readme = folder / "README.md"
        assert readme.exists(), f"{folder.name} has no README.md"
        text = readme.read_text(encoding="utf-8")
        for section in ("Question", "Command", "Machine", "Claims", "Not answered here"):
            said = re.search(rf"^(## {section}|\*\*{section}s?\.\*\*)", text, re.M)
            assert said, f"{folder.name}/README.md says no {section!r}"


def test_no_folder_is_named_after_the_history_of_the_work():
    named = [p.relative_to(STUDY).as_posix() for p in STUDY.rglob("*") if p.is_dir() and HISTORY.search(p.name)]
    assert named == []


def test_the_study_is_short_and_answers_by_question():
    text = (ROOT / "docs" / "study.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    cited = {m.split("/")[1] for m in re.findall(r"\(study/([\w-]+/)", text)}
    assert cited >= {p.name + "/" for p in STUDY.iterdir() if p.is_dir()} or cited, "a question left out"


def record_figures(folder: Path) -> set[float]:
    """Every samples/s and MB/s a folder's records hold (each record's median, and each timed epoch's)."""
    found: set[float] = set()
    for path in folder.rglob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if not isinstance(r, dict):
                continue
            for key in ("samples_per_s", "mb_per_s"):
                if isinstance(r.get(key), (int, float)):
                    found.add(float(r[key]))
            n, sample = r.get("samples_per_epoch"), r.get("sample_bytes")
            for s in r.get("epoch_seconds") or []:
                if isinstance(n, (int, float)) and isinstance(s, (int, float)) and s > 0:
                    found.add(n / s)
                    if isinstance(sample, (int, float)):
                        found.add(n * sample / s / 1e6)
    return found


def matches(text: str, figures: set[float]) -> bool:
    """A quoted figure is one of the records' at the precision it is printed with."""
    value = float(text.replace(",", ""))
    half = 0.5 * 10 ** -(len(text.split(".")[1]) if "." in text else 0)
    return any(abs(f - value) <= half + 1e-9 for f in figures)


def units(page: Path) -> list[str]:
    """The study's units of citation: each section of study.md (its figures from the folder its first link
    names), each table row of the README (from the folder that row links)."""
    text = page.read_text(encoding="utf-8")
    if page.name == "README.md":
        return [line for line in text.splitlines() if line.startswith("|")]
    return re.split(r"^## ", text, flags=re.M)[1:]


def quoted(page: Path) -> list[tuple[str, str, str]]:
    """(folder, figure, where) for every figure in a unit that cites a folder of the study."""
    out = []
    for unit in units(page):
        folders = re.findall(r"study/([\w-]+)/", unit)
        if not folders:
            continue
        measured = re.sub(r"`[^`]*`", "", " ".join(unit.split()))  # code: the settings asked for, not figures
        for low, high, _unit in FIGURE.findall(measured):
            out += [(folders[0], x, unit.splitlines()[0]) for x in (low, high) if x]
    return out


def test_the_checker_reads_the_figures_of_every_question():
    assert len(quoted(ROOT / "docs" / "study.md")) >= 15 and len(quoted(ROOT / "README.md")) >= 10


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "docs" / "study.md"], ids=["README", "study"])
def test_every_figure_quoted_is_in_the_records_it_cites(page):
    cache: dict[str, set[float]] = {}
    wrong = []
    for folder, figure, line in quoted(page):
        figures = cache.setdefault(folder, record_figures(STUDY / folder))
        if not matches(figure, figures):
            wrong.append(f"{figure} (study/{folder}): {line[:100]}")
    assert wrong == []


def test_the_script_regenerates_a_committed_report_from_its_records(tmp_path):
    """scripts/regenerate_study.py on one question's folder gives the report that is committed beside its records."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "scripts/regenerate_study.py", "--only", "accelerator-utilisation", "--into", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    made = (tmp_path / "accelerator-utilisation" / "report.md").read_text(encoding="utf-8")
    assert made == (STUDY / "accelerator-utilisation" / "report.md").read_text(encoding="utf-8")
