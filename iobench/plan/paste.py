"""The code `tune` hands over: a complete script that runs the winning configuration as it was measured.

Complete (imports, the dataset's real path), picklable under spawn and forkserver (no lambdas: the
collate function and the dataset come from iobench), reading whole batches as the measured run did,
and with a `__main__` block that times a few epochs so the user can check the figure on the spot.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from iobench.loaders import LoaderName
from iobench.loaders.transforms import TransformOn
from iobench.plan.config import RunConfig
from iobench.plan.script_text import fitted, import_block, py_literal, step_parts, tidy, timing_main
from iobench.settings import batches_ahead, command_flags, dataloader_arguments


def loader_arguments(c: RunConfig) -> list[str]:
    """DataLoader keyword arguments of the configuration, in the order a reader expects them."""
    s = c.settings
    args = [f"sampler=Batches(len(dataset), {s.batch_size}, shuffle={c.shuffle})", "batch_size=None"]
    return [*args, *_keywords(s), "collate_fn=passthrough"]


def _keywords(s: Any) -> list[str]:
    """The settings' DataLoader keywords as a script writes them (`iobench.settings.dataloader_arguments`)."""
    return [f"{k}={py_literal(v)}" for k, v in dataloader_arguments(s).items()]


def _api_import(names: list[str], on_device: str | None) -> str:
    """The line importing what the script uses from iobench.api (device_transform when it augments there)."""
    return "from iobench.api import " + ", ".join(sorted([*names, *(["device_transform"] if on_device else [])]))


def _dataloader(c: RunConfig, opened: list[str], on_device: str | None) -> tuple[list[str], list[str]]:
    """Imports and make_loader() for a DataLoader reading whole batches."""
    api = _api_import(["Batches", "open_dataset", "passthrough"], on_device)
    make = [
        "def make_loader() -> DataLoader:",
        *fitted(4, "dataset = open_dataset", ["DATASET", *opened[1:]]),
        "    # one numpy array of indices per batch, read in one call: the pattern tune measured",
        "    return DataLoader(",
        "        dataset,",
        *(f"        {arg}," for arg in loader_arguments(c)),
        "    )",
    ]
    return ["from torch.utils.data import DataLoader", "", api], make


def _nodes_loader(c: RunConfig, opened: list[str], on_device: str | None) -> tuple[list[str], list[str]]:
    """Imports and make_loader() for torchdata.nodes with threads, as `--loader nodes` read."""
    s = c.settings
    api = _api_import(["Batches", "ThreadBatches", "open_dataset"], on_device)
    make = [
        "def make_loader() -> nodes.Loader:",
        *fitted(4, "dataset = open_dataset", ["DATASET", *opened[1:]]),
        "    # one numpy array of indices per batch, read in one call by one of the threads: what tune measured",
        *fitted(4, "node = nodes.SamplerWrapper", [f"Batches(len(dataset), {s.batch_size}, shuffle={c.shuffle})"]),
        *fitted(
            4,
            "node = nodes.ParallelMapper",
            [
                "node",
                "ThreadBatches(dataset)",
                f"num_workers={s.num_workers}",
                f"in_order={s.in_order}",
                'method="thread"',
            ],
        ),
        *(["    node = nodes.PinMemory(node)"] if s.pin_memory else []),
        f"    node = nodes.Prefetcher(node, prefetch_factor={batches_ahead(s)})",
        "    return nodes.Loader(node)",
    ]
    return ["from torchdata import nodes", "", api], make


def _native_loader(c: RunConfig, opened: list[str], on_device: str | None) -> tuple[list[str], list[str]]:
    """Imports and make_loader() for the format's own library pipeline, as `--loader native` read."""
    s = c.settings
    args = [f"batch_size={s.batch_size}", f"shuffle={c.shuffle}", *_keywords(s)]
    args += [f"options={py_literal(dict(c.format_options))}"] if c.format_options else []
    make = [
        "def make_loader() -> NativeBatches:",
        f"    # {c.format}'s own library pipeline with the knobs tune measured (--loader native)",
        "    return native_loader(",
        "        DATASET,",
        *(f"        {arg}," for arg in opened[1:]),
        *(f"        {arg}," for arg in args),
        "    )",
    ]
    return ["", _api_import(["NativeBatches", "native_loader"], on_device)], make


# What a format's plain script reads: the files, the class of its Dataset (one whole batch of indices per call, as
# tune measured), and its code. Formats not here (and host transforms) paste iobench's checked readers instead.
_PLAIN_DATASETS = {
    "npy": [
        "class Rows(torch.utils.data.Dataset):",
        '    """Both .npy files, memory-mapped in the process that reads (each worker maps its own); a batch',
        '    of indices read in one call: the pattern tune measured."""',
        "",
        "    def __init__(self, folder: str) -> None:",
        "        self.folder, self.features, self.labels = folder, None, None",
        '        self.n = np.load(f"{folder}/labels.npy", mmap_mode="r").shape[0]',
        "",
        "    def __len__(self) -> int:",
        "        return self.n",
        "",
        "    def __getitem__(self, indices: Window) -> tuple[torch.Tensor, torch.Tensor]:",
        "        if self.features is None:",
        '            self.features = np.load(f"{self.folder}/features.npy", mmap_mode="r")',
        '            self.labels = np.load(f"{self.folder}/labels.npy", mmap_mode="r")',
        "        # a batch of indices gathers (a copy); a run of rows is copied out of the mapping",
        "        features = np.array(self.features[indices])",
        "        labels = np.array(self.labels[indices])",
        "        return torch.from_numpy(features), torch.from_numpy(labels)",
    ],
    "memmap": [
        "class Rows(torch.utils.data.Dataset):",
        '    """The TensorDict memmap folder, loaded lazily in the process that reads; a batch of indices read in one',
        '    call: the pattern tune measured."""',
        "",
        "    def __init__(self, folder: str) -> None:",
        "        self.folder, self.data = folder, None",
        "        self.n = TensorDict.load_memmap(folder).batch_size[0]",
        "",
        "    def __len__(self) -> int:",
        "        return self.n",
        "",
        "    def __getitem__(self, indices: Window) -> tuple[torch.Tensor, torch.Tensor]:",
        "        if self.data is None:",
        "            self.data = TensorDict.load_memmap(self.folder)",
        "        # a batch of indices gathers (a copy); a run of rows is a view of the mapping, copied here",
        "        if isinstance(indices, slice):",
        "            batch = self.data[indices].clone()",
        "        else:",
        "            batch = self.data[torch.from_numpy(indices)]",
        '        return batch["features"], batch["labels"]',
    ],
}

# The sampler tune measured, written out in plain PyTorch: one numpy array of indices per batch, a new permutation
# each epoch (a run of rows, unshuffled, as a slice). RandomSampler and BatchSampler hand over a Python list of ints
# per batch: 0.07 s an epoch on their own, and the pasted script ran at 0.64-0.74 of tune's figure beside load.
_BATCHES = [
    "Window = np.ndarray | slice  # a batch of indices, or a run of rows",
    "",
    "",
    "class Batches(torch.utils.data.Sampler):",
    '    """Each batch of indices as one numpy array, a new permutation every epoch; unshuffled, each run of rows as a',
    '    slice: the sampler tune measured."""',
    "",
    "    def __init__(self, n: int, batch_size: int, shuffle: bool, seed: int = 0) -> None:",
    "        self.n, self.batch_size, self.shuffle = n, batch_size, shuffle",
    "        self.seed, self.epoch = seed, 0",
    "",
    "    def __iter__(self) -> Iterator[Window]:",
    "        starts = range(0, self.n, self.batch_size)",
    "        if self.shuffle:",
    "            order = np.random.default_rng([self.seed, self.epoch]).permutation(self.n)",
    "        self.epoch += 1",
    "        for start in starts:",
    "            stop = min(start + self.batch_size, self.n)",
    "            yield order[start:stop] if self.shuffle else slice(start, stop)",
    "",
    "    def __len__(self) -> int:",
    "        return (self.n + self.batch_size - 1) // self.batch_size",
]


def plain(c: RunConfig) -> bool:
    """Whether the best pastes as plain PyTorch and the format's own library (no iobench): npy and memmap through
    the DataLoader or tensorclass, with no host transform (iobench's transforms are its own code)."""
    host = c.transform != "none" and c.transform_on is TransformOn.HOST
    return c.format in _PLAIN_DATASETS and c.loader in (LoaderName.DATALOADER, LoaderName.TENSORCLASS) and not host


def _plain_loader(c: RunConfig, on_device: str | None) -> tuple[list[str], list[str], str]:
    """Imports, the sampler, the Dataset and make_loader() in plain PyTorch (`plain`), and how a batch unpacks: the
    sampler, the batches read in one call and the DataLoader's keywords as tune measured them."""
    s = c.settings
    tensorclass = c.loader is LoaderName.TENSORCLASS
    args = [
        "sampler=Batches(len(dataset), " + f"{s.batch_size}, shuffle={c.shuffle})",
        "batch_size=None",
        *loader_arguments(c)[2:-1],
    ]
    if tensorclass:  # tensordict's own loading: whole batches of the memmap by index, passed through as they are
        dataset = [*_WHOLE, "", ""]
        body = [
            "    dataset = Whole(DATASET)",
            "    return DataLoader(",
            "        dataset,",
            *(f"        {arg}," for arg in args),
            "        collate_fn=whole,",
            "    )",
        ]
        unpack = 'features, labels = batch["features"], batch["labels"]'
    else:
        body = [
            "    dataset = Rows(DATASET)",
            "    return DataLoader(",
            "        dataset,",
            *(f"        {arg}," for arg in args),
            "        collate_fn=as_read,",
            "    )",
        ]
        dataset, unpack = [*_PLAIN_DATASETS[c.format], "", "", *_AS_READ, "", ""], "features, labels = batch"
    imports = ["from torch.utils.data import DataLoader", "import numpy as np", "from collections.abc import Iterator"]
    imports += ["from tensordict import TensorDict"] if tensorclass or c.format == "memmap" else []
    imports += ["from iobench.api import device_transform"] if on_device else []
    return imports, [*_BATCHES, "", "", *dataset, "def make_loader() -> DataLoader:", *body], unpack


# The collate tune measured: a batch read in one call passed through. Without a collate_fn, a DataLoader of batch_size
# None converts each batch (default_convert): a third of plain npy's rate (3.5 M rows/s against 5.1 M).
_AS_READ = [
    "def as_read(",
    "    batch: tuple[torch.Tensor, torch.Tensor],",
    ") -> tuple[torch.Tensor, torch.Tensor]:",
    '    """A batch read in one call is one already: passed through as it is."""',
    "    return batch",
]


# tensorclass loading: the memmap folder as a TensorDict, a batch of indices one index (a run of rows a view, copied)
_WHOLE = [
    "class Whole(torch.utils.data.Dataset):",
    '    """The TensorDict memmap, loaded lazily in the process that reads; a batch of indices is one index of it."""',
    "",
    "    def __init__(self, folder: str) -> None:",
    "        self.folder, self.data = folder, None",
    "        self.n = TensorDict.load_memmap(folder).batch_size[0]",
    "",
    "    def __len__(self) -> int:",
    "        return self.n",
    "",
    "    def __getitem__(self, indices: Window) -> TensorDict:",
    "        if self.data is None:",
    "            self.data = TensorDict.load_memmap(self.folder)",
    "        if isinstance(indices, slice):",
    "            return self.data[indices].clone()",
    "        return self.data[torch.from_numpy(indices)]",
    "",
    "",
    "def whole(batch: TensorDict) -> TensorDict:",
    '    """A batch read in one call is one already: passed through as it is."""',
    "    return batch",
]


def best_script(c: RunConfig, measured: str, dataset_dir: Path, device: str, folder: Path | None = None) -> str:
    """The configuration as a Python file; `measured` is the figure tune found, quoted in its docstring. npy and
    memmap through the DataLoader or tensorclass paste as plain PyTorch and the format's own library, so a training
    script does not depend on iobench; the others read through iobench's checked readers (`iobench.api`). A user's
    step is imported from `folder` (where tune imported it: the working directory)."""
    from iobench.data.manifest import Manifest

    tensorclass = c.loader is LoaderName.TENSORCLASS
    host = c.transform if c.transform != "none" and c.transform_on is TransformOn.HOST else "none"
    on_device = c.transform if c.transform != "none" and c.transform_on is TransformOn.DEVICE else None
    opened = [py_literal(str(dataset_dir.resolve())), py_literal(c.format)]
    if host != "none":
        opened.append(f"transform={py_literal(host)}")
    if tensorclass:
        opened.append("tensorclass=True")
    threads = [f"torch.set_num_threads({c.torch_threads})"] if c.torch_threads is not None else []
    unpack = "features, labels = batch.features, batch.labels" if tensorclass else "features, labels = batch"
    move = f"features = features.to(DEVICE, non_blocking={c.settings.non_blocking})"
    if plain(c):
        imports, make, unpack = _plain_loader(c, on_device)
        needs = "plain PyTorch and " + ("numpy" if c.format == "npy" else "tensordict")
        opened[0] = py_literal(str(dataset_dir.resolve() / c.format))  # the format's own folder
    else:
        build = {LoaderName.NODES: _nodes_loader, LoaderName.NATIVE: _native_loader}.get(c.loader, _dataloader)
        imports, make = build(c, opened, on_device)
        needs = "iobench must be installed: its readers check the files"
    spec = Manifest.load(dataset_dir).spec
    step_imports, step_lines, step_call = step_parts(
        c.step, folder or Path.cwd(), spec.features_per_sample, spec.n_classes, c.settings.non_blocking
    )
    lines = [
        f'"""iobench tune\'s best configuration: {c.format} through {c.loader.value}, {measured}.',
        "",
        f"Run it to check the figure here; copy make_loader() into a training script ({needs}).",
        '"""',
        "",
        *import_block(["import statistics", "import time", "import torch", *imports, *step_imports]),
        "",
        f"DATASET = {opened[0]}",
        f"DEVICE = torch.device({py_literal(device)})",
        *threads,
        "",
        *step_lines,
        "",
        *make,
        "",
        "",
        *timing_main(c.epochs, measured, unpack, move, on_device, step_call),
    ]
    return tidy(lines)


def factory_script(request: Any, measured: str, folder: Path, device: str, features_per_sample: int = 1) -> str:
    """tune --dataset-factory's best: the user's function in a DataLoader with the measured settings and the step the
    search ran with (the folder it was imported from goes first on sys.path, so the script runs from anywhere)."""
    module, _, function = request.factory.partition(":")
    s = request.settings
    args = [f"batch_size={s.batch_size}", f"shuffle={request.shuffle}", *_keywords(s)]
    threads = [f"torch.set_num_threads({request.torch_threads})"] if request.torch_threads is not None else []
    from iobench.measuring.user_loader import N_CLASSES

    step_imports, step_lines, step_call = step_parts(
        request.step, folder, max(1, features_per_sample), N_CLASSES, s.non_blocking
    )
    if step_call:  # a user's labels may be anything: the stand-in takes them modulo its classes, as the run did
        step_call = [
            step_call[0].replace("labels.to(", f"(labels % {N_CLASSES}).to(")
            if request.step == "mlp"
            else step_call[0],
            step_call[1],
        ]
    lines = [
        f'"""iobench tune\'s best DataLoader settings for {request.factory}, {measured}.',
        "",
        "Run it to check the figure here; copy make_loader() into a training script.",
        '"""',
        "",
        *import_block(
            [
                "import statistics",
                "import sys",
                "import time",
                "import torch",
                "from torch.utils.data import DataLoader",
                "from iobench.api import split_batch",
                *step_imports,
            ]
        ),
        "",
        f"# where {module} was imported from",
        f"sys.path.insert(0, {py_literal(str(folder.resolve()))})",
        f"from {module} import {function}  # noqa: E402",
        "",
        f"DEVICE = torch.device({py_literal(device)})",
        *threads,
        "",
        *[line for line in step_lines if not line.startswith(("sys.path.insert", "# your step"))],
        "",
        "def make_loader() -> DataLoader:",
        "    return DataLoader(",
        f"        {function}(),",
        *(f"        {arg}," for arg in args),
        "    )",
        "",
        "",
        *timing_main(
            request.epochs,
            measured,
            "features, labels = split_batch(batch)",
            f"features = features.to(DEVICE, non_blocking={s.non_blocking})",
            step=step_call,
        ),
    ]
    return tidy(lines)


def run_command(c: RunConfig, place: list[str], device: str) -> str:
    """The `iobench run` that measures configuration `c` again where the search measured it (`place`: the
    options naming the data and the store, as typed)."""
    s = c.settings
    args = [
        "iobench",
        "run",
        *place,
        "--format",
        c.format,
        "--loader",
        c.loader.value,
        "--device",
        device,
        "--batch-size",
        str(s.batch_size),
        "--num-workers",
        str(s.num_workers),
        "--cache",
        c.cache.value,
    ]
    args += command_flags(s, device.startswith("cuda"))
    args += ["--no-shuffle"] if not c.shuffle else []
    args += ["--step", c.step] if c.step != "none" else []
    args += ["--transform", c.transform, "--transform-on", c.transform_on.value] if c.transform != "none" else []
    args += ["--torch-threads", str(c.torch_threads)] if c.torch_threads is not None else []
    args += [part for k, v in c.format_options for part in ("--format-option", f"{c.format}.{k}={v}")]
    return " ".join(shlex.quote(a) for a in args)
