"""`iobench run --nproc N`: the request's arguments (`RunRequest.to_argv`) run by N ranks on this machine
(`iobench.system.ranks`: the store a file of this user's, every rank ended with this process), as torchrun
--standalone would run it, without its store on every interface."""

from __future__ import annotations

from iobench.errors import IobenchError, RunFailed
from iobench.system.processes import python_module
from iobench.system.ranks import run_ranks


def rank_argv(argv: list[str]) -> list[str]:
    """What each rank runs. It imports the iobench that is running: `python -m iobench` would put the working
    directory first on its path (a folder named iobench there would run)."""
    return python_module("iobench", *argv, unbuffered=True)


def shown(argv: list[str], nproc: int) -> str:
    """What is launched, as a user would read it (said before launching)."""
    import shlex

    return f"{nproc} ranks on this machine (their store a file of this user's): " + shlex.join(["iobench", *argv])


def launch(argv: list[str], nproc: int) -> None:
    """Run the ranks from this process; a failed rank becomes one line (each rank has said why)."""
    exits = run_ranks(rank_argv(argv), nproc)
    failed = [e for e in exits if e.code != 0]
    if not failed:
        return
    text = ", ".join(f"rank {e.rank} exited {e.code}" for e in failed)
    own = [e.code for e in failed if e.code >= 0]  # negative: stopped by a signal, after another rank failed
    if own and all(code == IobenchError.exit_code for code in own):
        raise IobenchError(f"ranks: {text}") from None
    raise RunFailed(f"ranks: {text}") from None
