"""What the untimed pass after a cold eviction reads: a tiny twin of the dataset in the same format.

The pass (`format_epochs.prime`) brings back, before the clock, the code, libraries and lazily imported modules a cold
epoch runs: after drop_caches, or what the VM's pageout took (a first cold epoch with workers read 45 MB for a 10 MB
dataset without it). It read a few shuffled batches of the dataset itself, and each row's fault pulled in the
disk's read-ahead: around one cold command the kernel counted 2.01x the dataset. The twin has the dataset's spec
(shape, dtype, content) and its format's options as prepared, and two batches of rows: the same code paths read, the
dataset's pages untouched. It is prepared once per process in iobench's private folder and removed at exit. A
dataset prepared from the user's own files (`--from`) has no generated twin: its pass reads its first rows in order.
"""

from __future__ import annotations

import atexit
import json
import shutil
from dataclasses import replace
from pathlib import Path

from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.plan.config import Order
from iobench.plan.resolve import ResolvedRun, RunTarget, resolve
from iobench.system.world import SINGLE

PRIME_BATCHES = 2  # batches of the untimed pass
_TWINS: dict[tuple, Path | None] = {}
_FOLDER: list[Path] = []


def primed(resolved: ResolvedRun) -> ResolvedRun:
    """The run as the pass reads it: its first PRIME_BATCHES batches, of the twin where there is one, else of the
    dataset in order (the fewest of its pages, in sequence)."""
    c = replace(resolved.config, max_batches=PRIME_BATCHES)
    twin = _twin(resolved)
    if twin is not None:
        try:
            return resolve(replace(c, runs=1), RunTarget(twin, resolved.device, None), SINGLE)
        except IobenchError:
            pass
    return replace(resolved, config=replace(c, order=Order.SEQUENTIAL, block_size=0))


def _twin(resolved: ResolvedRun) -> Path | None:
    """The twin's dataset folder, prepared on first use; None where the dataset is the user's own (`--from`), is
    read from object storage, or its format cannot be prepared that small."""
    spec, fmt, entry = resolved.manifest.spec, resolved.config.format, resolved.entry
    if spec.source is not None or resolved.storage.kind != "local":
        return None
    n = min(spec.n_samples, PRIME_BATCHES * resolved.config.settings.batch_size)
    twin_spec = replace(spec, n_samples=n)
    key = (fmt, twin_spec, json.dumps(entry.options, sort_keys=True, default=str))
    if key not in _TWINS:
        _TWINS[key] = _prepared(twin_spec, fmt, entry.options, len(_TWINS))
    return _TWINS[key]


def _prepared(spec: object, fmt: str, options: dict, k: int) -> Path | None:
    from iobench.data.prepare import WriteRequest, prepare

    folder = _folder() / f"twin-{k}"
    try:
        request = WriteRequest(spec, folder, (fmt,), {fmt: FORMATS[fmt].options_from_json(options)})  # type: ignore[arg-type]
        prepare(request)
    except (IobenchError, OSError, ValueError, TypeError):
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return request.dataset_dir


def _folder() -> Path:
    """This process's folder of twins in iobench's state folder (what a killed process left is removed by the next)."""
    if not _FOLDER:
        from iobench.system.private import private_dir

        _FOLDER.append(private_dir("prime"))
        atexit.register(shutil.rmtree, _FOLDER[0], True)
    return _FOLDER[0]
