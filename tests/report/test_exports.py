"""The report as people open it: a CSV of the records for a spreadsheet, one HTML file with its plots inside, a
report of one dataset alone; and plots that join only figures of one kind of data."""

from __future__ import annotations

import csv
import json

import pytest

from iobench.report.plots import kind_of_data
from iobench.results.record import RunRecord
from tests.conftest import FLAT_RECORD


def test_report_writes_csv_and_one_html_file_and_filters_by_dataset(tmp_path, cli):
    results = tmp_path / "r.jsonl"
    hostile = "=cmd|' /C calc'!A0 <script>alert(1)</script>"
    lines = [FLAT_RECORD, {**FLAT_RECORD, "dataset": hostile, "batch_size": 32}]
    results.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = cli("report", results, "--out", tmp_path / "report")
    assert r.code == 0, r.err
    rows = list(csv.DictReader(open(tmp_path / "report" / "results.csv", encoding="utf-8")))
    assert len(rows) == 2 and {row["dataset"][:1] for row in rows} == {"n", "'"}, "a formula is written as text"
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page and "<table>" in page
    assert page.count("data:image/png;base64,") == (tmp_path / "report" / "report.md").read_text().count("![")
    r = cli("report", results, "--out", tmp_path / "one", "--dataset", FLAT_RECORD["dataset"])
    assert r.code == 0 and "2 configurations" not in (tmp_path / "one" / "report.md").read_text()
    r = cli("report", results, "--out", tmp_path / "none", "--dataset", "nosuch")
    assert r.code == 2 and "no records of dataset 'nosuch'" in r.err


def test_a_line_joins_only_figures_of_one_kind_of_data():
    table = RunRecord.from_json(FLAT_RECORD)
    photos = RunRecord.from_json(
        {**FLAT_RECORD, "source": "/data/photos", "sample_shape": [3, 224, 224], "dtype": "uint8", "n_samples": 2002}
    )
    assert kind_of_data(table) != kind_of_data(photos)
    assert kind_of_data(RunRecord.from_json({**FLAT_RECORD, "n_samples": 5000})) == kind_of_data(table)


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", " =1", "  @x", "\tx", "\rx"])
def test_a_cell_a_spreadsheet_would_read_as_a_formula_is_quoted(text):
    """OWASP's CSV injection list: =, +, -, @, a tab or a carriage return first, or behind leading spaces; the tab,
    CR and space forms were written as they were."""
    from iobench.report.exports import csv_cell

    assert csv_cell(text) == "'" + text


@pytest.mark.parametrize("text", ["npy", " npy", "bs=1024 w=0", "a-b", ""])
def test_a_plain_cell_is_written_as_it_is(text):
    from iobench.report.exports import csv_cell

    assert csv_cell(text) == text
