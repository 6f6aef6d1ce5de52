"""Measuring one run: clocks, steps, the split and its statistics, ranks, the machine's ceilings, and the
user's own loader timed the same way. Imports loaders and below, never the plan or the drivers."""
