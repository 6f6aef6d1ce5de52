"""Whether this process is one rank of a torchrun launch: read from the environment, no torch needed
(the command line asks before it knows whether it will measure anything)."""

from __future__ import annotations

import os
from collections.abc import Mapping

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


def launched_by_torchrun(env: Mapping[str, str] = os.environ) -> bool:
    return all(name in env for name in TORCHRUN_VARIABLES)
