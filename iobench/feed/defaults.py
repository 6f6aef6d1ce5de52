"""`iobench feed`'s defaults and the bounds of its counts, declared once: the command line's options default to them
and are checked against them, the request holds the same defaults. A light module (`feed --help` imports it)."""

from pathlib import Path

EPOCHS = 2  # measured at each count, after a warm-up epoch
MOST = 16  # --max-accelerators: the most ranks tried
RESULTS = Path("results/feed.jsonl")
MAX_ACCELERATORS = 256  # ranks of one machine
MAX_SIZE = 10**9
MAX_EPOCHS = 100
MAX_BATCH = 1 << 20
MAX_STEP_MS = 3_600_000.0
MAX_WORKERS = 256
MAX_SAMPLE_BYTES = 1 << 34
MAX_WHAT_IF = 4  # --what-if's steps: each is another search
