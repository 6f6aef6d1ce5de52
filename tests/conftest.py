"""Shared helpers: tiny datasets and a CLI runner that captures output and the exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from iobench.cli import main
from iobench.data import dataset

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys):
    """Run `iobench ARGS...` in this process."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def invoke(*args) -> None:
    """Run `iobench ARGS...` in this process for a fixture's setup; it must succeed."""
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in args])
    assert info.value.code == 0, args


def prepare_with_limits(root: Path, size: str, formats: str) -> None:
    """A tiny dataset in root/data, and limits.json measured with a small probe beside root/*.jsonl."""
    invoke("prepare", "--size", size, "--data-dir", root / "data", "-q", "--formats", formats)
    invoke("limits", "--data-dir", root / "data", "--results", root / "r.jsonl", "--probe-size", "16M")


def run_subprocess(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "iobench", *map(str, args)], capture_output=True, text=True, env=env, cwd=ROOT, **kwargs
    )


@pytest.fixture
def small_chunks(monkeypatch):
    """Generation chunks of 4 KiB, so tiny datasets still cross many chunk boundaries."""
    monkeypatch.setattr(dataset, "GENERATION_CHUNK_BYTES", 4096)


def assert_one_line_error(result: CliResult, *fragments: str) -> None:
    assert result.code == 2, (result.code, result.out, result.err)
    lines = [line for line in result.err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith("iobench: error:"), lines[0]
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
