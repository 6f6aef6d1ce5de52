"""Results files: one JSON record per line, appended whole; readers skip a torn line and say which."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from iobench.errors import IobenchError
from iobench.results.checked import RecordError
from iobench.results.limits import MachineLimits, RemoteLimits
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
    mid-write) gets a newline first, so the new line starts on a line of its own and stays readable. The file is
    opened without following a link and must be a results file (`check_results_file`): a link planted in a shared
    folder led root's records into /etc/passwd, and `--results model.safetensors` appended to a user's model."""
    line = (text + "\n").encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, APPEND_FLAGS, 0o666)
        try:
            _check_results_fd(fd, path)
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
        raise IobenchError(_cannot_write(path, exc)) from None


APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
HEAD_BYTES = 2**20  # the start of a file read to tell whether it holds iobench's records
HEAD_LINES = 4
RECORD_KINDS = ("checkpoint", "checkpoint-kill", "feed")


def _cannot_write(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return f"--results {path} is a link; give the file it points to"
    if exc.errno == errno.EISDIR:
        return f"--results {path} is a directory"
    return f"cannot write results to {path}: {exc.strerror or exc}"


def is_record(value: object) -> bool:
    """A JSON value that iobench wrote as a record: a run's (its format, loader and time) or a checkpoint's."""
    if not isinstance(value, dict):
        return False
    return value.get("kind") in RECORD_KINDS or all(k in value for k in ("format", "loader", "timestamp"))


def check_results_file(path: Path) -> None:
    """Refuse in one line, before anything is measured, a --results that iobench must not append to: a link, anything
    but a regular file, a file with other names (hard links), or a file whose lines are not iobench records. A file
    that does not exist yet, or is empty, is fine."""
    try:
        fd = os.open(path, OPEN_FLAGS)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise IobenchError(_cannot_write(path, exc)) from None
    try:
        _check_results_fd(fd, path)
    finally:
        os.close(fd)


def _check_results_fd(fd: int, path: Path) -> None:
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise IobenchError(f"--results {path} is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise IobenchError(f"--results {path} is not a regular file")
    if st.st_nlink > 1:
        raise IobenchError(f"--results {path} has {st.st_nlink} names (hard links); give a results file of its own")
    if st.st_size == 0:
        return
    values = []
    for raw in os.pread(fd, HEAD_BYTES, 0).split(b"\n")[:HEAD_LINES]:
        if raw.strip():
            try:
                values.append(json.loads(raw))
            except (ValueError, RecursionError):
                values.append(None)  # torn, or not JSON at all
    found = [v for v in values if v is not None]
    if not found or not all(is_record(v) for v in found):
        raise IobenchError(
            f"--results {path} holds something other than iobench records; give another file (records "
            "are appended only to a results file of iobench's, or to a new one)"
        )


def check_writable(path: Path | str, *, records: bool = True, kinds: tuple[str | None, ...] = (None,)) -> None:
    """Refuse before measuring when the results could not be written afterwards, or must not be written there (a file
    of records: `check_results_file`; `records=False`, a file iobench replaces whole by a rename: limits.json). A
    folder that does not exist yet is made when the first result is written, never by a run that is refused. (A str
    too: typer 0.27 on the lent GPU machine left a path option's value a str in ctx.params.)"""
    path = Path(path)
    folder = path.parent
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise IobenchError(f"cannot create {folder} for the results: {existing} is not a folder")
    if existing != folder:
        if not os.access(existing, os.W_OK | os.X_OK):
            raise IobenchError(f"cannot create {folder} for the results: {existing} is not writable")
        return
    if records:
        check_results_file(path)
        check_kind(path, kinds)
    target = path if path.exists() else folder
    if not os.access(target, os.W_OK):
        raise IobenchError(f"cannot write results to {path}: permission denied")


def _nearest_existing(folder: Path) -> Path:
    """`folder`, or the nearest of its parents that exists: where it would be made."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def pasted_code_path(results: Path, tag: str) -> Path:
    """Where a command writes the code it pastes (`<results stem>-<tag>.py`, beside the results), checked before it
    measures: not a folder or anything but a file, and in a folder no other user can write (they could rename their
    own file over it before the user runs it). A world-writable folder with the sticky bit (/tmp) lets no one replace
    another's file: accepted."""
    script = results.with_name(f"{results.stem}-{tag}.py")
    with contextlib.suppress(FileNotFoundError):
        st = os.lstat(script)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise IobenchError(
                f"cannot write the pasted code to {script}: it is not a file (move it, or give another --results)"
            )
    folder = _nearest_existing(script.parent)  # the results' folder is made later: the one it will be made in decides
    st = os.stat(folder)
    others = st.st_uid not in (os.geteuid(), 0)
    shared = st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX
    if others or shared:
        who = (
            f"belongs to uid {st.st_uid}"
            if others
            else f"is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
        )
        raise IobenchError(
            f"cannot write the pasted code to {script}: {folder} {who}, who could replace it before you run it; give "
            "--results in a folder of your own"
        )
    return script


def check_readable_file(path: Path, what: str) -> None:
    """A regular file (through a link or not), or one line saying what it is instead: a FIFO would block the read
    and /dev/zero never end it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise IobenchError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise IobenchError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a folder"
            if stat.S_ISDIR(st.st_mode)
            else "a FIFO"
            if stat.S_ISFIFO(st.st_mode)
            else "a device"
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a socket or other"
        )
        raise IobenchError(f"{path}: {kind}, not a {what}")


def json_lines(path: Path) -> Iterator[tuple[int, Any, str]]:
    """(line number, value, "") of each non-empty line of a JSONL file; a line that is not JSON is (number, None,
    why it is skipped). Refused in one line: a file that is not there or cannot be read."""
    check_readable_file(path, "results file")
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


def parsed_lines(path: Path, parse: Callable[[object], T], what: str) -> Iterator[tuple[T | None, str]]:
    """Each line of the file as `parse` makes it, or None with why it was skipped ("": it was not)."""
    for number, value, problem in json_lines(path):
        if problem:
            yield None, f"{path}:{number}: {problem}; skipped"
            continue
        try:
            yield parse(value), ""
        except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting 200k deep
            reason = "nested too deep" if isinstance(exc, RecursionError) else str(exc)[:80]
            yield None, f"{path}:{number}: not {what} ({reason}); skipped"
        except RecordError as exc:
            yield None, f"{path}:{number}: not {what} ({exc}); skipped"


def first_kind(path: Path) -> str | None:
    """The `kind` of the file's first readable record (a results file holds one kind; a run record has none): None
    also for a file that cannot be read (the reader of run records then says why, in one line)."""
    try:
        for _, value, problem in json_lines(path):
            if not problem:
                kind = value.get("kind") if isinstance(value, dict) else None
                return kind if isinstance(kind, str) else None
    except IobenchError:
        return None
    return None


def check_kind(path: Path, kinds: tuple[str | None, ...]) -> None:
    """Refuse in one line, before anything is measured, appending records of `kinds` (None: a run's) to a file whose
    records are of another kind: `report` and `compare` read a file by its first record's kind."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    found = first_kind(path)
    if found not in kinds:
        wanted = " or ".join(dict.fromkeys(_kind_words(k) for k in kinds))
        raise IobenchError(f"--results {path} holds {_kind_words(found)}; give a file of its own for {wanted}")


def _kind_words(kind: str | None) -> str:
    """A kind as the user reads it: run, feed or checkpoint records (a checkpoint's kill counts are its records)."""
    return f"{kind.split('-')[0]} records" if kind else "run records"


def parsed_file(path: Path, parse: Callable[[object], T], what: str) -> tuple[list[T], list[str]]:
    """Every line of the file that `parse` reads, and why each other line was skipped."""
    records: list[T] = []
    skipped: list[str] = []
    for record, why in parsed_lines(path, parse, what):
        if record is None:
            skipped.append(why)
        else:
            records.append(record)
    return records, skipped


def load_records(path: Path) -> RecordFile:
    """Every readable record; a line that is not one (torn, edited) is skipped and named."""
    return RecordFile(*parsed_file(path, RunRecord.from_json, "an iobench record"))


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


def latest_per_config(records: list[RunRecord]) -> list[RunRecord]:
    """One record per configuration: the latest, in first-seen order (what report shows and compare matches)."""
    by_key: dict[tuple, RunRecord] = {}
    for r in records:
        by_key[r.identity()] = r
    return list(by_key.values())
