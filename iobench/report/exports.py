"""The report in two more forms people open: the records as CSV (one row per record, every stored field, for a
spreadsheet) and the report as one HTML file with its plots embedded (sent by mail, opened anywhere)."""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path

from iobench.results.record import RunRecord
from iobench.system.fsutil import atomic_write_text


def write_report_files(out: Path, lines: list[str], csv_text: str, images: Sequence[Path] = ()) -> list[Path]:
    """The one way every report is written (runs, checkpoints, feed): report.md, the same as report.html (its images
    embedded), results.csv; the paths written, the Markdown first."""
    path = out / "report.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    write_html("\n".join(lines), out, out / "report.html")
    atomic_write_text(out / "results.csv", csv_text)
    return [path, out / "report.html", out / "results.csv", *images]


def records_csv(records: Sequence[RunRecord], superseded: Sequence[RunRecord] = ()) -> str:
    """Every record's stored fields, one row each; lists and maps as JSON in their cell. `superseded`: records a later
    one of the same configuration replaces in the report, kept here with `superseded` true."""
    gone = {id(r) for r in superseded}
    rows = [{**r.to_json(), "superseded": id(r) in gone} for r in records]
    columns = list(dict.fromkeys(key for row in rows for key in row))
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([csv_cell(row.get(key)) for key in columns])
    return text.getvalue()


# OWASP's CSV injection: a cell a spreadsheet reads as a formula begins with =, +, -, @, a tab or a carriage return,
# or with spaces (or those) before one of them
_FORMULA = re.compile(r"[\t\r ]*[=+\-@\t\r]")


def csv_cell(value: object) -> object:
    if isinstance(value, list | dict):
        return json.dumps(value)
    if isinstance(value, str) and _FORMULA.match(value):  # a spreadsheet would run it as a formula
        return "'" + value
    return "" if value is None else value


_IMAGE = re.compile(r"!\[([^\]]*)\]\(([A-Za-z0-9_.-]+\.png)\)")


def write_html(markdown: str, folder: Path, path: Path) -> Path:
    """report.md as one HTML file: its headings, lists and tables as HTML (every record string escaped), its plots
    embedded as data URLs. The Markdown iobench writes is a small subset; nothing else is interpreted."""
    body, table = [], []

    def flush() -> None:
        if table:
            head, *rows = [
                [c.strip() for c in line.strip().strip("|").split(" | ")] for line in table if "---" not in line
            ]
            body.append(
                "<table><tr>"
                + "".join(f"<th>{_inline(c)}</th>" for c in head)
                + "</tr>"
                + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in rows)
                + "</table>"
            )
            table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush()
        if (image := _IMAGE.fullmatch(line.strip())) is not None:
            data = base64.b64encode((folder / image[2]).read_bytes()).decode("ascii")
            body.append(f'<img alt="{html.escape(image[1])}" src="data:image/png;base64,{data}">')
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("- "):
            body.append(f"<ul><li>{_inline(line[2:])}</li></ul>")
        elif line.strip():
            body.append(f"<p>{_inline(line)}</p>")
    flush()
    style = (
        "body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}img{max-width:100%}"
    )
    atomic_write_text(
        path,
        f"<!doctype html><html><head><meta charset='utf-8'><style>{style}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n",
    )
    return path


def _inline(text: str) -> str:
    """Markdown's escapes undone, everything escaped as HTML, then iobench's own bold and code marks."""
    plain = re.sub(r"\\([|\[\]])", r"\1", text).replace("&lt;", "<").replace("&gt;", ">")
    escaped = html.escape(plain)
    escaped = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", escaped)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
