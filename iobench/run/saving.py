"""A record is never lost after a long measurement: appended to the results file, or, if that fails, kept in a new
file of iobench's own state folder (created there, never an existing name or a link), or else written whole on
stderr."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from iobench.errors import IobenchError
from iobench.events import Events
from iobench.results.record import RunRecord
from iobench.results.store import append_record


def save(results: Path, record: RunRecord, events: Events) -> None:
    """Append the record; if that fails, keep it elsewhere and say where, then raise the failure."""
    from iobench.system.private import create_exclusive, owner_tag, state_root

    try:
        append_record(results, record)
    except IobenchError as exc:
        line = (json.dumps(record.to_json(), allow_nan=True) + "\n").encode()
        try:
            rescue = state_root() / f"unsaved-{owner_tag()}-{time.time_ns()}.jsonl"
            create_exclusive(rescue, line)
            events.say(f"{exc}; the record was saved to {rescue} instead")
        except (IobenchError, OSError):
            events.say(f"{exc}; the record follows on stderr")
            sys.stderr.write(line.decode())
            sys.stderr.flush()
        raise
