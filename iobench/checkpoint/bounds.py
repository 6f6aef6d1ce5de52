"""The bounds of `iobench checkpoint`'s counts, where the command line parses them and the request checks them again:
a light module (the command line's --help imports nothing heavy)."""

MAX_TRIALS = 1000  # rounds: each is every library's saves and restores, a process a trial (seconds at the least)
MAX_KILLS = 10_000  # kills per library and save mode
