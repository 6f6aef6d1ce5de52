"""iobench: how fast does training data travel from disk to the device in PyTorch?"""

import importlib
import importlib.abc
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path

__version__ = "0.3.0"
__all__ = ["measure", "open_dataset", "Measurement"]

# The Python API, imported on first use: `import iobench` (and `iobench --help`) stays free of torch.
_API = {
    "measure": "iobench.run.user_measure",
    "Measurement": "iobench.run.user_measure",
    "open_dataset": "iobench.api",
}


def __getattr__(name: str) -> object:
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])


_HERE = Path(__file__).resolve().parent
_CHECKOUT_FORMATS = _HERE.parent / "formats"


class _CheckoutFormats(importlib.abc.MetaPathFinder):
    """`iobench.formats` from a checkout, where formats/ sits beside this folder (installed, it is inside).

    Run from a checkout (`python -m iobench`, `torchrun -m iobench`: the working directory comes first on
    sys.path) this package is the checkout's even when iobench is installed, so it finds formats/ there."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if name != f"{__name__}.formats":
            return None
        init = _CHECKOUT_FORMATS / "__init__.py"
        return importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])


if not (_HERE / "formats").is_dir() and (_CHECKOUT_FORMATS / "__init__.py").is_file():
    sys.meta_path.append(_CheckoutFormats())
