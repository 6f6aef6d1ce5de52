"""Which (format, loader) pairs a command runs: the standard comparison, or the product of comma lists."""

from __future__ import annotations

from iobench.choices import parse_choices, split_list
from iobench.formats import DEFAULT_FORMATS, FORMATS
from iobench.loaders import DEFAULT_LOADER, LOADERS, LoaderName, ObjectReach, check_installed, unreadable

DEFAULT_PAIRS = (
    ("npy", LoaderName.DATALOADER),
    ("hdf5", LoaderName.DATALOADER),
    ("lmdb", LoaderName.DATALOADER),
    ("memmap", LoaderName.DATALOADER),
    ("memmap", LoaderName.TENSORCLASS),
)

# The loader whose settings the settings preset crosses and the report's heatmap draws (worker processes x their
# prefetch), and the one a user's own Dataset (--dataset-factory) is read through: torch's DataLoader
SETTINGS_LOADER = FACTORY_LOADER = LoaderName.DATALOADER
SCALING_LOADERS = (LoaderName.DATALOADER, LoaderName.TENSORCLASS)  # the scaling preset's pair
RESIDENT_BASELINE = LoaderName.GPU_RESIDENT  # the settings preset's row with nothing to move from storage
# tune's loaders in the order it tries them: on local files threads and the library's pipeline first
TUNED_LOCAL = (LoaderName.NODES, LoaderName.NATIVE, LoaderName.DATALOADER, LoaderName.TENSORCLASS)
TUNED_REMOTE = (LoaderName.DATALOADER, LoaderName.NODES, LoaderName.NATIVE)


FORMAT_NAMES = tuple(FORMATS)  # every registered format (plug-ins included), for the command line's help
DEFAULT_FORMAT_NAMES = tuple(DEFAULT_FORMATS)
DEFAULT_LOADER_NAME = DEFAULT_LOADER


def loader_help() -> str:
    """--loader's help, made from the registry: every loader, what `all` leaves out and the extra each of those needs
    (the hand-written help said all left out ray and nodes, while it leaves out every loader that needs an extra)."""
    needing: dict[str, list[str]] = {}
    for name, kind in LOADERS.items():
        if kind.extra is not None:
            needing.setdefault(kind.extra, []).append(name.value)
    extras = "; ".join(f"{', '.join(names)}: `pip install 'iobench\\[{extra}]'`" for extra, names in needing.items())
    return (
        f"Comma list of {', '.join(n.value for n in LOADERS)}, or all (default: dataloader, plus tensorclass on "
        "memmap, or from object storage each format's own pipeline where it has one). all leaves out the loaders "
        f"that need an extra unless named ({extras})."
    )


def tuned_loaders(fmt: str, remote: bool = False) -> tuple[LoaderName, ...]:
    """The loaders tune searches for a format: each installed that reads it (from object storage, each that
    reaches it there)."""
    order = TUNED_REMOTE if remote else TUNED_LOCAL
    return tuple(
        n
        for n in order
        if LOADERS[n].installed
        and fmt in LOADERS[n].reads
        and (LOADERS[n].objects is not ObjectReach.NONE or not remote)
    )


def parse_loaders(text: str) -> tuple[LoaderName, ...]:
    """Loader names from a comma list; `all` leaves out every loader that needs an extra unless named. A loader named
    whose extra is missing is refused here, before anything heavy is imported (a refusal took 7-14 s on a busy
    machine, importing torch and the library first)."""
    chosen = parse_choices(text, tuple(n.value for n in LOADERS), "loader")
    named = split_list(text, "loader")
    for ld in named:
        if ld in LOADERS:
            check_installed(LoaderName(ld))
    return tuple(LoaderName(ld) for ld in chosen if LOADERS[LoaderName(ld)].extra is None or ld in named)


def default_loaders(remote: bool) -> tuple[LoaderName, LoaderName]:
    """With no loader named: the DataLoader and tensorclass, or from object storage (which tensorclass does not read)
    the DataLoader and each format's own pipeline."""
    return LoaderName.DATALOADER, LoaderName.NATIVE if remote else LoaderName.TENSORCLASS


def parse_pairs(
    formats: str | None, loaders: str | None, remote: bool = False
) -> tuple[list[tuple[str, LoaderName]], list[str]]:
    """(format, loader) pairs to run, and notes on the combinations skipped.

    With neither given: the standard comparison. Lists and 'all' expand to their product minus
    what does not go together (said in the notes); a single explicit pair that does not go
    together is an error. From object storage (`remote`), with no loader named, each format's own
    pipeline stands where tensorclass would, which reads local files only.
    """
    if formats is None and loaders is None and not remote:
        return list(DEFAULT_PAIRS), []
    fmts = parse_choices(formats, tuple(FORMATS), "format") if formats is not None else DEFAULT_FORMATS
    lds = parse_loaders(loaders) if loaders is not None else None
    if lds is None:  # each format with the default loaders that read it
        return [(f, ld) for f in fmts for ld in default_loaders(remote) if f in LOADERS[ld].reads], []
    pairs, skipped = [], []
    for f in fmts:
        for ld in lds:
            (pairs if f in LOADERS[ld].reads else skipped).append((f, ld))
    if not pairs:
        raise unreadable(*skipped[0])
    notes = [f"skipped {f}/{ld}: {ld} reads {', '.join(LOADERS[ld].reads)} only" for f, ld in skipped]
    return pairs, notes


def without_memory_resident(configs: list, named: str | None, cpu: bool) -> tuple[list, list[str]]:
    """On the CPU, `--loader all` leaves out the loaders that hold the dataset in device memory (there: the dataset in
    RAM, no way from storage; gpu-resident ran as if it were one, npy 169,510 samples/s), saying so; named, they run."""
    if not cpu or named is None:
        return configs, []
    explicit = set(split_list(named, "loader"))
    left = [c for c in configs if LOADERS[c.loader].in_device_memory and c.loader.value not in explicit]
    cuda = [c for c in configs if LOADERS[c.loader].needs_cuda and c.loader.value not in explicit]
    notes = []
    if left:
        names = ", ".join(dict.fromkeys(c.loader.value for c in left))
        notes.append(
            f"skipped {names}: on the CPU it holds the dataset in RAM, not a way from storage (--loader "
            f"{names} measures it)"
        )
    if cuda:
        names = ", ".join(dict.fromkeys(c.loader.value for c in cuda))
        notes.append(f"skipped {names}: it reads into device memory, which needs CUDA")
    return [c for c in configs if c not in left and c not in cuda], notes
