"""A record's values as Markdown text: records may come from someone else."""

from __future__ import annotations

_MD_ESCAPES = str.maketrans({"|": "\\|", "<": "&lt;", ">": "&gt;", "\n": " ", "\r": " ", "[": "\\[", "]": "\\]"})


def md_text(value: object) -> str:
    """A value from a record as Markdown text: a pipe cannot split a table cell, a newline cannot end a
    line, `<script>` stays text, and brackets cannot open a link or an image (`![x](http://...)`: records may come
    from someone else)."""
    return str(value).translate(_MD_ESCAPES)
