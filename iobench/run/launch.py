"""`iobench run --nproc N`: the same command line, run by torchrun's own launcher on this machine."""

from __future__ import annotations

from iobench.errors import IobenchError, RunFailed
from iobench.system.processes import python_module


def rank_arguments(argv: list[str]) -> list[str]:
    """`iobench ARGV` without its --nproc option: what each rank runs."""
    rest: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            rest.append(arg)
    return rest


def torchrun_args(argv: list[str], nproc: int) -> list[str]:
    """torchrun's arguments on N local processes. Each rank imports the iobench that is running: torchrun's own
    `-m iobench` would put the working directory first on its path (a folder named iobench there would run)."""
    rest = rank_arguments(argv)
    return [
        "--standalone",
        "--nproc-per-node",
        str(nproc),
        "--no-python",
        *python_module("iobench", *rest, unbuffered=True),
    ]


def shown(argv: list[str], nproc: int) -> str:
    """The torchrun command as a user would type it (said before launching)."""
    return " ".join(["torchrun", "--standalone", "--nproc-per-node", str(nproc), "-m", "iobench",
                     *rank_arguments(argv)])  # fmt: skip


def launch(args: list[str]) -> None:
    """Run torchrun in this process; a failed rank becomes one line (each rank has said why)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    _quiet_launcher()
    try:
        run(parse_args(args))
    except ChildFailedError as exc:
        codes = {rank: failure.exitcode for rank, failure in exc.failures.items()}
        text = ", ".join(f"rank {rank} exited {code}" for rank, code in sorted(codes.items()))
        own = [code for code in codes.values() if code >= 0]  # negative: stopped by torchrun's signal
        if own and all(code == IobenchError.exit_code for code in own):
            raise IobenchError(f"torchrun: {text}") from None
        raise RunFailed(f"torchrun: {text}") from None
    except SignalException:
        raise KeyboardInterrupt from None


def _quiet_launcher() -> None:
    """torchrun's launcher logs each rank it stops and each that failed ("Sending process N closing signal SIGTERM",
    "failed (exitcode: 1) local_rank: 1 ..."): the ranks' own lines and `launch`'s one line say it."""
    import logging

    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
