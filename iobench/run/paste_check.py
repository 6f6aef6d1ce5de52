"""`tune --check-paste`: the script tune pasted, run in a fresh process as the user would run it, its figure beside
tune's. "Run it to check the figure" did not check it: the script ran at 0.64-0.74 of tune's figure on a shared
machine (another sampler, the step left out, and the best of many noisy measurements reported)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from iobench.errors import one_line
from iobench.system.processes import python_code

MEDIAN = re.compile(r"median of the timed epochs: ([0-9,.]+) samples/s")


@dataclass(frozen=True)
class PasteCheck:
    figure: float | None  # the script's median (samples/s, or seconds); None: it failed (`said` says how)
    said: str  # its last line, or its failure in one line

    def ratio(self, tune_figure: float) -> float | None:
        """The script's figure over tune's (a speed's; for seconds, take the inverse)."""
        return None if self.figure is None or tune_figure <= 0 else self.figure / tune_figure


# The check's process: tied to iobench and its group ended with it (`iobench.system.children.tied`), then the code
# iobench holds, read from standard input (an unnamed file), run as a script: never re-read from a path, which anyone
# who can write its folder could rename their own file over between the write and the run (the eighth probe did, and
# root ran it).
_RUN_FROM_STDIN = (
    "from iobench.system.children import tied\n"
    "tied()\n"
    "import __main__, sys\n"
    "sys.argv[:] = [{name!r}]\n"
    "exec(compile(sys.stdin.read(), {name!r}, 'exec'), __main__.__dict__)\n"
)


def check_paste(text: str, name: str, timeout_s: float, figure: re.Pattern[str] = MEDIAN) -> PasteCheck:
    """The code `text` (what iobench wrote to the file `name`) in a fresh process importing the running iobench (never
    the working directory's), at most `timeout_s`; the figure its output states (`figure`'s first group: by default
    its median samples/s). It runs from the text, not from the file."""
    from iobench.system.children import run_child

    try:
        done = run_child(python_code(_RUN_FROM_STDIN.format(name=name)), timeout_s, stdin_text=text, cwd="/")
    except subprocess.TimeoutExpired:
        return PasteCheck(None, f"the script ran past {timeout_s:.0f} s")
    found = figure.search(done.stdout)
    if done.code != 0 or found is None:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        return PasteCheck(
            None, f"the script failed (rc {done.code}): {one_line(Exception(lines[-1] if lines else ''))}"
        )
    return PasteCheck(float(found.group(1).replace(",", "")), done.stdout.strip().splitlines()[-1])
