"""The one record of a stopping signal: which came first decides the exit code, and a command called again in-process
starts with none."""

from __future__ import annotations

import signal

from iobench.system.signals import Ending


def test_the_first_signal_is_the_one_kept_and_clearing_forgets_it():
    ending = Ending()
    assert not ending.is_set() and ending.signum is None
    ending.set(signal.SIGTERM)
    ending.set(signal.SIGINT)  # a Ctrl-C while SIGTERM is being handled: still ended by SIGTERM (143)
    assert ending.is_set() and ending.signum == signal.SIGTERM
    ending.clear()
    assert not ending.is_set() and ending.signum is None
