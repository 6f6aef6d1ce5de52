"""Building a loader by name over a format reader."""

from __future__ import annotations

import importlib

from iobench.loaders import LOADERS, LoaderName
from iobench.loaders.base import Loader, LoaderContext


def make_loader(name: LoaderName, ctx: LoaderContext) -> Loader:
    """Build the named loader (with the prefetch thread around it when asked): every kind from the same
    context, so a new kind needs a LOADERS entry and nothing here."""
    kind = LOADERS[name]
    cls = getattr(importlib.import_module(f"iobench.loaders.{kind.module}"), kind.cls)
    loader: Loader = cls(ctx)
    if ctx.settings.prefetch_thread:
        from iobench.loaders.prefetch import PrefetchThread

        loader = PrefetchThread(loader, ctx.settings.prefetch_thread)
    return loader
