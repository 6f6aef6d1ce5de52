"""`iobench run --nproc N`: the same command line, run by torchrun's own launcher on this machine."""

from __future__ import annotations

from iobench.errors import IobenchError, RunFailed


def torchrun_args(argv: list[str], nproc: int) -> list[str]:
    """torchrun's arguments for `iobench ARGV` without its --nproc option, on N local processes."""
    rest: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            rest.append(arg)
    return ["--standalone", "--nproc-per-node", str(nproc), "-m", "iobench", *rest]


def launch(args: list[str]) -> None:
    """Run torchrun in this process; a failed rank becomes one line (each rank has said why)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

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
