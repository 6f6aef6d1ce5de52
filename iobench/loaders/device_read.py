"""Reads straight into device memory: a fixed-layout dataset's features file read whole into a CUDA tensor by cuFile,
with no host copy, inside the first epoch's clock (a cold epoch is the load and the epoch); every epoch's batches are
then gathered there, as `gpu-resident` gathers them.

Two readers, the first that works: kvikio's `CuFile.pread` (RAPIDS; GPUDirect Storage where the GDS driver is, else
its compatibility mode: POSIX reads through a bounce buffer, which worked on an H200 guest without the driver), then
`torch.cuda.gds.GdsFile.load_storage` (in torch, but GDS only: on that guest it failed with "cuFileHandleRegister
failed: file descriptor is not registered"). The record's `read_method` names the one that read and its mode.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import numpy as np
import torch

from iobench.errors import IobenchError
from iobench.loaders.base import LoaderContext, ReadMethod
from iobench.loaders.device import synchronize
from iobench.loaders.resident import ResidentLoader
from iobench.system.fsutil import open_regular

NEEDS_CUDA = "reads into device memory: needs CUDA"


def kvikio_mode(kvikio: object) -> ReadMethod:
    """kvikio's mode as it reads: compatibility (POSIX through a bounce buffer) or GDS (its settings API moved in
    25.x: `defaults.get("compat_mode")`, earlier `defaults.compat_mode()`)."""
    try:  # a submodule: `import kvikio` alone leaves kvikio.defaults unset (kvikio 26.10)
        defaults = importlib.import_module(f"{kvikio.__name__}.defaults")
    except (ImportError, AttributeError):
        defaults = getattr(kvikio, "defaults", None)
    try:
        compat = defaults.get("compat_mode") if hasattr(defaults, "get") else defaults.compat_mode()  # type: ignore
    except Exception:  # an API this version lacks: say what is known
        return ReadMethod.DEVICE_KVIKIO
    name = str(getattr(compat, "name", compat)).upper()
    if name == "AUTO" and hasattr(defaults, "is_compat_mode_preferred"):  # AUTO: what kvikio found (GDS or not)
        name = "ON" if defaults.is_compat_mode_preferred() else "OFF"  # type: ignore[union-attr]
    on = name in ("ON", "TRUE", "1")
    return ReadMethod.DEVICE_KVIKIO_COMPAT if on else ReadMethod.DEVICE_KVIKIO_GDS


def read_into_device(path: Path, offset: int, target: torch.Tensor) -> ReadMethod:
    """`target.numel()` bytes of `path` from `offset` into the CUDA byte tensor `target`; how they were read. A file
    that is shorter, or that no reader here can read into device memory, is one line."""
    path = Path(os.path.realpath(open_regular(path)))  # a regular local file, resolved: never a URL or a pattern
    size = target.numel()
    failures = []
    try:
        import kvikio

        with kvikio.CuFile(str(path), "r") as f:
            got = f.pread(target, size, file_offset=offset).get()
        if got != size:
            raise IobenchError(f"{path.name}: {got:,} bytes read into device memory of {size:,}")
        return kvikio_mode(kvikio)
    except ImportError:
        failures.append("kvikio is not installed (pip install kvikio-cu12 or kvikio-cu13)")
    except (OSError, RuntimeError) as exc:
        failures.append(f"kvikio: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    try:
        from torch.cuda.gds import GdsFile

        if offset % 4096:  # cuFile's reads into device memory start on a page of the file
            raise RuntimeError(f"the data starts at byte {offset}, not on a 4 KiB page")
        GdsFile(str(path), os.O_RDONLY).load_storage(target.untyped_storage(), offset)
        return ReadMethod.DEVICE_TORCH_GDS
    except (ImportError, OSError, RuntimeError) as exc:
        failures.append(f"torch's GdsFile: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    raise IobenchError(f"--loader device-read: no reader here reads into device memory: {'; '.join(failures)}")


class DeviceReadLoader(ResidentLoader):
    """npy and memmap read into device memory by cuFile inside the first epoch's clock, batches gathered there."""

    name = "device-read"

    def __init__(self, ctx: LoaderContext) -> None:
        if ctx.device.type != "cuda":
            ctx.reader.close()
            raise IobenchError(f"--loader device-read {NEEDS_CUDA} (--device {ctx.device})")
        super().__init__(ctx)

    def _load(self) -> None:
        reader, device = self.reader, self.device
        assert reader is not None
        spec, layout = reader.spec, reader.fixed_layout()
        if layout is None:  # the registry reads fixed layouts only; a plug-in that stopped declaring one
            raise IobenchError(f"--loader device-read reads fixed-layout formats (npy, memmap), not {spec}")
        features = torch.empty((spec.n_samples, *spec.shape), dtype=getattr(torch, spec.dtype), device=device)
        flat = features.view(-1).view(torch.uint8)
        self.method = read_into_device(layout.features, layout.features_offset, flat)
        with open(open_regular(layout.labels), "rb") as f:
            stored = np.fromfile(f, dtype=np.int64, count=spec.n_samples, offset=layout.labels_offset)
        labels = torch.from_numpy(stored).to(device)
        synchronize(device)
        self.features, self.labels = features, labels
        self.reader = None
        reader.close()
