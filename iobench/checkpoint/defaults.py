"""`iobench checkpoint`'s defaults and the bounds of its counts, declared once: the command line's options default to
them and its parser checks the bounds, the request holds the same defaults and checks the bounds again. A light module
(the command line's --help imports nothing heavy)."""

from pathlib import Path

from iobench.results.checkpoint_record import SAVE_MODES as RECORD_SAVE_MODES
from iobench.results.checkpoint_record import SaveMode

MAX_ROUNDS = 1000  # rounds: each is every library's saves and restores, a process a trial (seconds at the least)
MAX_KILLS = 10_000  # kills per library and save mode

PARAMS = "2.5e7"  # 350 MB of state: seconds a save here
LAYOUT = "llama"
LIBRARIES = "all"
DIRECTORY = Path("checkpoints")
ROUNDS = 3  # the fewest that give an interval
RESULTS = Path("results/checkpoints.jsonl")
WORKLOAD_RESULTS = Path("results/checkpoint-workload.jsonl")  # --workload's records: a results file holds one kind
SAVE_MODES = tuple(SaveMode(m) for m in RECORD_SAVE_MODES)  # inplace, safe
KILL_TEST = 0
KILL_PARAMS = "2e6"  # 28 MB: what a kill tests is a save's commit, not the weights

# `checkpoint --tune`: the save modes it searches unless --save-mode names some (keep:3: a job's pattern, the last
# three kept), the kills it runs per library and mode unless --kill-test names more, the time it may take
TUNE_SAVE_MODES = (*SAVE_MODES, SaveMode.keeping(3))
TUNE_KILLS = 5
TUNE_BUDGET_MINUTES = 30.0
MAX_BUDGET_MINUTES = 7 * 24 * 60.0
