"""`iobench checkpoint`'s defaults and the bounds of its counts, declared once: the command line's options default to
them and its parser checks the bounds, the request holds the same defaults and checks the bounds again. A light module
(the command line's --help imports nothing heavy)."""

from pathlib import Path

MAX_ROUNDS = 1000  # rounds: each is every library's saves and restores, a process a trial (seconds at the least)
MAX_KILLS = 10_000  # kills per library and save mode

PARAMS = "2.5e7"  # 350 MB of state: seconds a save here
LAYOUT = "llama"
LIBRARIES = "all"
DIRECTORY = Path("checkpoints")
ROUNDS = 3  # the fewest that give an interval
RESULTS = Path("results/checkpoints.jsonl")
SAVE_MODES = ("inplace", "safe")
KILL_TEST = 0
KILL_PARAMS = "2e6"  # 28 MB: what a kill tests is a save's commit, not the weights
