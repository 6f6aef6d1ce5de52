"""The loader registry: which loader reads which format and what it needs installed (`factory` builds
one). Light on purpose: the command line lists loaders without importing torch."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from iobench.choices import Choice
from iobench.errors import IobenchError
from iobench.formats import FIXED_LAYOUT, FORMATS, PIPELINE


class LoaderName(Choice):
    DATALOADER = "dataloader"
    TENSORCLASS = "tensorclass"
    GPU_RESIDENT = "gpu-resident"
    RAY = "ray"
    DIRECT = "direct"
    NATIVE = "native"
    NODES = "nodes"


@dataclass(frozen=True)
class LoaderKind:
    """A loader: the formats it reads, its class (imported when built), an optional extra it needs."""

    name: LoaderName
    only: tuple[str, ...] | None  # the formats it reads; None: every registered one, plug-ins included
    module: str
    cls: str
    extra: str | None = None  # the pip extra (and module) it needs; `all` leaves such loaders out
    library: str | None = None  # the extra's library by name, for the line that refuses it when missing
    needs: str | None = None  # a capability a format must declare to be read (formats.PIPELINE, FIXED_LAYOUT)
    libraries: tuple[str, ...] = ()  # what it reads with beyond torch (distribution names), for records
    forks: bool = True  # --num-workers are processes forked from this one (False: threads of this process)

    @property
    def installed(self) -> bool:
        """Whether what it needs can be imported (found, not imported: listing stays light)."""
        return self.extra is None or importlib.util.find_spec(self.extra) is not None

    @property
    def reads(self) -> tuple[str, ...]:
        named = tuple(FORMATS) if self.only is None else self.only
        return named if self.needs is None else tuple(n for n in named if FORMATS.capable(n, self.needs))


LOADERS: dict[LoaderName, LoaderKind] = {
    k.name: k
    for k in (
        LoaderKind(LoaderName.DATALOADER, None, "dataloader", "DataLoaderLoader"),
        # tensorclass loading is tensordict's memmap path.
        LoaderKind(LoaderName.TENSORCLASS, ("memmap",), "tensorclass", "TensorclassLoader", libraries=("tensordict",)),
        LoaderKind(LoaderName.GPU_RESIDENT, None, "resident", "ResidentLoader"),
        LoaderKind(LoaderName.RAY, None, "ray_actors", "RayLoader", extra="ray", library="Ray", libraries=("ray",)),
        # concurrent preadv straight into buffers: formats whose samples lie at known offsets
        LoaderKind(LoaderName.DIRECT, None, "direct", "DirectLoader", needs=FIXED_LAYOUT),
        # the format's own library pipeline (WebDataset's shard shuffle and buffer, ...)
        LoaderKind(LoaderName.NATIVE, None, "native", "NativeLoader", needs=PIPELINE),
        # torchdata.nodes: threads of this process instead of worker processes, over any format
        LoaderKind(
            LoaderName.NODES,
            None,
            "nodes",
            "NodesLoader",
            extra="torchdata",
            library="torchdata",
            libraries=("torchdata",),
            forks=False,
        ),
    )
}
CORE_LOADERS = tuple(k.name for k in LOADERS.values() if k.extra is None)


def check_reads(loader: LoaderName, fmt: str) -> None:
    if fmt not in LOADERS[loader].reads:
        raise unreadable(fmt, loader)


def unreadable(fmt: str, loader: LoaderName) -> IobenchError:
    return IobenchError(f"--loader {loader} does not read --format {fmt}; it reads {', '.join(LOADERS[loader].reads)}")
