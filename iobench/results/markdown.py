"""A record's values as Markdown text: records may come from someone else."""

from __future__ import annotations

_MD_ESCAPES = str.maketrans({"|": "\\|", "<": "&lt;", ">": "&gt;", "\n": " ", "\r": " ", "[": "\\[", "]": "\\]"})


def md_text(value: object) -> str:
    """A value from a record as Markdown text: a pipe cannot split a table cell, a newline cannot end a
    line, `<script>` stays text, and brackets cannot open a link or an image (`![x](http://...)`: records may come
    from someone else)."""
    return str(value).translate(_MD_ESCAPES)


def md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines: the head as written (iobench's words), every cell a record's value as text."""
    return [
        "| " + " | ".join(head) + " |",
        "|" + " --- |" * len(head),
        *("| " + " | ".join(md_text(c) for c in cells) + " |" for cells in rows),
    ]
