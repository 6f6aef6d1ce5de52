"""Results files: one JSON record per line, appended whole; readers skip a torn line and say which."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from iobench.errors import IobenchError
from iobench.results.ceilings import MachineLimits, RemoteLimits
from iobench.results.checked import RecordError
from iobench.results.record import RunRecord

T = TypeVar("T")


@dataclass
class RecordFile:
    records: list[RunRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # 'path:line: why', one per line not read


def append_record(path: Path, record: RunRecord) -> None:
    """Append one whole line and fsync it: a crash later in a sweep never loses finished runs."""
    append_line(path, json.dumps(record.to_json(), allow_nan=True))


def append_line(path: Path, text: str) -> None:
    """`text` appended as one whole line and fsynced. A file whose last line was torn (a full disk, a crash
    mid-write) gets a newline first, so the new line starts on a line of its own and stays readable."""
    line = (text + "\n").encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":  # the last line was torn
                line = b"\n" + line
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, f"only {written} of {len(line)} bytes written")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise IobenchError(f"cannot write results to {path}: {exc.strerror or exc}") from None


def check_writable(path: Path) -> None:
    """Refuse before measuring when the results could not be written afterwards."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IobenchError(f"cannot create {folder} for the results: {exc.strerror or exc}") from None
    if path.is_dir():
        raise IobenchError(f"--results {path} is a directory")
    target = path if path.exists() else folder
    if not os.access(target, os.W_OK):
        raise IobenchError(f"cannot write results to {path}: permission denied")


def json_lines(path: Path) -> Iterator[tuple[int, Any, str]]:
    """(line number, value, "") of each non-empty line of a JSONL file; a line that is not JSON is (number, None,
    why it is skipped). Refused in one line: a file that is not there or cannot be read."""
    if not path.is_file():
        raise IobenchError(f"{path}: no such results file")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError:
                    yield number, None, "not a whole JSON record (torn or edited)"
                except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting 200k deep
                    reason = "nested too deep" if isinstance(exc, RecursionError) else str(exc)[:80]
                    yield number, None, f"not an iobench record ({reason})"
                else:
                    yield number, value, ""
    except OSError as exc:
        raise IobenchError(f"cannot read {path}: {exc.strerror or exc}") from None


def load_records(path: Path) -> RecordFile:
    """Every readable record; a line that is not one (torn, edited) is skipped and named."""
    loaded = RecordFile()
    for number, value, problem in json_lines(path):
        if problem:
            loaded.skipped.append(f"{path}:{number}: {problem}; skipped")
            continue
        try:
            loaded.records.append(RunRecord.from_json(value))
        except (ValueError, RecursionError) as exc:
            reason = "nested too deep" if isinstance(exc, RecursionError) else str(exc)[:80]
            loaded.skipped.append(f"{path}:{number}: not an iobench record ({reason}); skipped")
        except RecordError as exc:
            loaded.skipped.append(f"{path}:{number}: not an iobench record ({exc}); skipped")
    return loaded


def read_records(path: Path) -> list[RunRecord]:
    return load_records(path).records


def done_identities(path: Path) -> set[tuple]:
    """Identities of the configurations a results file already holds (a resumed sweep skips them)."""
    return {r.identity() for r in load_records(path).records} if path.is_file() else set()


def limits_path(results: Path) -> Path:
    return results.parent / "limits.json"


def cache_folder() -> Path:
    """iobench's folder in the user's cache (`$XDG_CACHE_HOME/iobench`, else `~/.cache/iobench`): what is measured
    once per machine, whatever folder a command runs from or writes its results to."""
    import os

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "iobench"


def cached_limits_path() -> Path:
    return cache_folder() / "limits.json"


def load_cached_limits() -> dict[str, MachineLimits]:
    """Every entry of the user's cache of limits (`cached_limits_path`)."""
    return _load_entries(cached_limits_path(), MachineLimits.from_json, "iobench limits")


def remote_limits_path(results: Path) -> Path:
    return results.parent / "remote_limits.json"


def load_all_limits(results: Path) -> dict[str, MachineLimits]:
    """Every stored entry by its host:device key; a file that is not limits is refused in one line."""
    return _load_entries(limits_path(results), MachineLimits.from_json, "iobench limits")


def load_all_remote_limits(results: Path) -> dict[str, RemoteLimits]:
    """Every stored remote entry by its host:endpoint key (`remote_limits_key`)."""
    return _load_entries(remote_limits_path(results), RemoteLimits.from_json, "iobench limits --remote")


def _load_entries(path: Path, parse: Callable[[object], T], command: str) -> dict[str, T]:
    if not path.is_file():
        return {}
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        reason = "nested too deep" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise IobenchError(f"{path}: not readable limits ({reason}); delete it and run `{command}`") from None
    if not isinstance(stored, dict):
        raise IobenchError(f"{path}: not a JSON object of limits; delete it and run `{command}`")
    try:
        return {str(k): parse(v) for k, v in stored.items()}
    except RecordError as exc:
        raise IobenchError(f"{path}: {exc}; delete it and run `{command}`") from None
