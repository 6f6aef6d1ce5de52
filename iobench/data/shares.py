"""`python -m iobench.data.shares JOB`: one contiguous share of a format's samples, written in a process of
its own.

A format whose library writes in parallel (LitData, as `litdata.optimize` does) starts one of these per
extra share: like a forked format writer, it regenerates (or re-reads from the `--from` source) its own
range of samples from the dataset's spec, cutting the stream where prepare cuts it, and hands the chunks
to the format's `write_share`. It stops when the prepare that started it is gone or the disk is nearly full.
JOB is JSON (nothing is pickled): format, directory, spec, options, start, stop, parent, chunk_bytes.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from iobench import spec as spec_module
from iobench.data.writing import regenerated
from iobench.formats import FORMATS
from iobench.spec import DatasetSpec


def main(job: dict) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the prepare that started it decides, and kills it
    # each generation chunk's samples come from its own seed: cut where the parent cuts
    spec_module.GENERATION_CHUNK_BYTES = int(job["chunk_bytes"])
    spec, directory = DatasetSpec.from_json(job["spec"]), Path(job["directory"])
    fmt = FORMATS[job["format"]]
    chunks = regenerated(spec, directory, job["parent"], job["start"], job["stop"])
    fmt.write_share(directory, spec, fmt.options_from_json(job["options"]), chunks, job["stop"])


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
