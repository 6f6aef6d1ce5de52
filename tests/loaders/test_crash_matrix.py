"""The crash matrix in CI (`scripts/crash_matrix.py` runs the whole of it): a seeded sample of its cases, every
registered loader over every format it reads, cold, with a resume check, cut short, interrupted by SIGINT and with
several formats in one run, plus the cases the probe found crashing, each a `python -m iobench run` of its own on
200,000 rows (a race needs time to show: the suite's tiny datasets passed over all of them). Each must end in an
answer, a one-line refusal or, for SIGINT, rc 130 within 2 s (and its library's own shutdown: Ray's), and leave no
process behind; never a signal, a traceback or a hang."""

from __future__ import annotations

import importlib.util
import os
import random
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.crash

FORMATS = ["npy", "lmdb", "hdf5", "memmap"]
SIZE = "2e5"
SAMPLE, SEED = 10, int(os.environ.get("IOBENCH_CRASH_SEED", "59"))
# what the probe saw crash on d9bad02: nodes cold over npy (SIGSEGV 3 of 3), several formats through nodes and through
# the DataLoader's prefetch thread (SIGSEGV before the first table): (loader, variant, mode, formats)
ALWAYS = [
    ("nodes", "--num-workers 2", "cold", frozenset({"npy"})),
    ("nodes", "--num-workers 2", "multi", frozenset(FORMATS)),
    ("dataloader", "--prefetch-thread 2", "multi", frozenset(FORMATS)),
]


def _matrix():
    spec = importlib.util.spec_from_file_location("crash_matrix", ROOT / "scripts" / "crash_matrix.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


matrix = _matrix()


def _chosen() -> list:
    """The probe's crashes, then a seeded sample of the rest (`IOBENCH_CRASH_SEED` draws another)."""
    todo = matrix.cases(FORMATS, None, matrix.MODES)
    always = [(c, a) for c, a in todo if (c.loader, c.variant, c.mode, frozenset(c.formats)) in ALWAYS]
    rest = [c for c in todo if c not in always]
    return always + random.Random(SEED).sample(rest, min(SAMPLE, len(rest)))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return matrix.prepare(tmp_path_factory.mktemp("crash") / "data", SIZE, FORMATS)


@pytest.mark.parametrize(
    ("case", "args"),
    _chosen(),
    ids=lambda x: getattr(x, "mode", None) and f"{x.name}-{x.mode}-{'+'.join(x.formats)}".replace(" ", ""),
)
def test_a_loader_ends_in_an_answer_a_refusal_or_an_interruption(dataset, case, args):
    outcome = matrix.run_case(case, args, dataset, None, timeout=240, sigint_after=6)
    assert outcome.result in ("ok", "refused", "interrupted"), outcome
    assert outcome.left == 0, outcome


def test_a_sigint_exit_may_take_its_librarys_own_shutdown_and_no_more():
    """Ray ends its processes one after the other (ray-data's SIGINT exit 1.2-1.8 s quiet, 2.39 s once in CI)."""
    ray, core = matrix.grace_s("ray-data"), matrix.grace_s("dataloader")
    assert core == matrix.INTERRUPT_GRACE_S and ray == core + matrix.SHUTDOWN_S["ray"]
    assert matrix.classify(130, "iobench: interrupted", "sigint", 2.39, ray) == "interrupted"
    assert matrix.classify(130, "iobench: interrupted", "sigint", 2.39, core) == "slow exit"
    assert matrix.classify(130, "iobench: interrupted", "sigint", ray + 0.1, ray) == "slow exit"
