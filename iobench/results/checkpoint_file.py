"""`iobench checkpoint`'s records read back (`iobench.results.checkpoint_record`): `report` and `compare` read them
here; a line that is not one is skipped and named, as run records are."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from iobench.results.checkpoint_record import KINDS, CheckpointKills, CheckpointTrial, checkpoint_record
from iobench.results.store import first_kind, parsed_lines


@dataclass
class CheckpointFile:
    trials: list[CheckpointTrial] = field(default_factory=list)  # saves and restores
    kills: list[CheckpointKills] = field(default_factory=list)  # kill-test counts, one per library and run
    skipped: list[str] = field(default_factory=list)


def holds_checkpoints(path: Path) -> bool:
    """Whether the file holds checkpoint records (`first_kind`)."""
    return first_kind(path) in KINDS


def load_checkpoints(path: Path) -> CheckpointFile:
    """Every checkpoint record of the file; other lines skipped with the reason."""
    loaded = CheckpointFile()
    for record, skipped in parsed_lines(path, checkpoint_record, "a checkpoint record"):
        if record is None:
            loaded.skipped.append(skipped)
        else:
            (loaded.trials if isinstance(record, CheckpointTrial) else loaded.kills).append(record)
    return loaded
