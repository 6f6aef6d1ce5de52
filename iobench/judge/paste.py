"""Whether a pasted script ran as its tune measured: its figure over tune's, judged in one place for `tune` (samples/s)
and `checkpoint --tune` (seconds, turned into a speed). Below GOAL it does not run as measured; above 1/GOAL it ran
faster than measured, which a short figure's noise explains before anything else."""

from __future__ import annotations

GOAL = 0.9  # the pasted script's speed over tune's below this: said as a finding, not a pass
AS_MEASURED, SLOWER, FASTER = "as measured", "slower", "faster"


def paste_verdict(ratio: float) -> str:
    """`ratio`: the script's speed over tune's (samples/s over samples/s, or tune's seconds over the script's)."""
    if ratio < GOAL:
        return SLOWER
    if ratio > 1 / GOAL:
        return FASTER
    return AS_MEASURED


def verdict_words(verdict: str, what: str = "it does not run as tune measured") -> str:
    """A paste verdict in words, the same for every command (`what`: what SLOWER means for the figure judged)."""
    return {
        SLOWER: f"below {GOAL:g} of tune's speed: {what}",
        FASTER: "faster than tune measured: a short figure's noise explains that before anything else",
    }.get(verdict, AS_MEASURED)
