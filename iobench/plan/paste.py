"""The code `tune` hands over: a complete script that runs the winning configuration as it was measured.

Complete (imports, the dataset's real path), picklable under spawn and forkserver (no lambdas: the
collate function and the dataset come from iobench), reading whole batches as the measured run did,
and with a `__main__` block that times a few epochs so the user can check the figure on the spot.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from iobench.loaders import LoaderName
from iobench.loaders.transforms import TransformOn
from iobench.plan.config import RunConfig
from iobench.settings import command_flags, dataloader_arguments


def _py(value: Any) -> str:
    """A literal as ruff format writes it (double quotes): the pasted code passes the user's formatter as is."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    return repr(value)


def loader_arguments(c: RunConfig) -> list[str]:
    """DataLoader keyword arguments of the configuration, in the order a reader expects them."""
    s = c.settings
    args = [f"sampler=Batches(len(dataset), {s.batch_size}, shuffle={c.shuffle})", "batch_size=None"]
    return [*args, *_keywords(s), "collate_fn=passthrough"]


def _keywords(s: Any) -> list[str]:
    """The settings' DataLoader keywords as a script writes them (`iobench.settings.dataloader_arguments`)."""
    return [f"{k}={_py(v)}" for k, v in dataloader_arguments(s).items()]


def _api_import(names: list[str], on_device: str | None) -> str:
    """The line importing what the script uses from iobench.api (device_transform when it augments there)."""
    return "from iobench.api import " + ", ".join(sorted([*names, *(["device_transform"] if on_device else [])]))


def _dataloader(c: RunConfig, opened: list[str], on_device: str | None) -> tuple[list[str], list[str]]:
    """Imports and make_loader() for a DataLoader reading whole batches."""
    api = _api_import(["Batches", "open_dataset", "passthrough"], on_device)
    make = [
        "def make_loader() -> DataLoader:",
        f"    dataset = open_dataset(DATASET, {', '.join(opened[1:])})",
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
        f"    dataset = open_dataset(DATASET, {', '.join(opened[1:])})",
        "    # one numpy array of indices per batch, read in one call by one of the threads: what tune measured",
        f"    node = nodes.SamplerWrapper(Batches(len(dataset), {s.batch_size}, shuffle={c.shuffle}))",
        f"    node = nodes.ParallelMapper(node, ThreadBatches(dataset), num_workers={s.num_workers}, "
        f'in_order={s.in_order}, method="thread")',
        *(["    node = nodes.PinMemory(node)"] if s.pin_memory else []),
        f"    node = nodes.Prefetcher(node, prefetch_factor={s.prefetch_factor or 2})",
        "    return nodes.Loader(node)",
    ]
    return ["from torchdata import nodes", "", api], make


def _native_loader(c: RunConfig, opened: list[str], on_device: str | None) -> tuple[list[str], list[str]]:
    """Imports and make_loader() for the format's own library pipeline, as `--loader native` read."""
    s = c.settings
    args = [f"batch_size={s.batch_size}", f"shuffle={c.shuffle}", *_keywords(s)]
    args += [f"options={_py(dict(c.format_options))}"] if c.format_options else []
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
        "    def __getitem__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:",
        "        if self.features is None:",
        '            self.features = np.load(f"{self.folder}/features.npy", mmap_mode="r")',
        '            self.labels = np.load(f"{self.folder}/labels.npy", mmap_mode="r")',
        "        features, labels = self.features[indices], self.labels[indices]",
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
        "    def __getitem__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:",
        "        if self.data is None:",
        "            self.data = TensorDict.load_memmap(self.folder)",
        "        batch = self.data[torch.as_tensor(indices)]",
        '        return batch["features"], batch["labels"]',
    ],
}


def plain(c: RunConfig) -> bool:
    """Whether the best pastes as plain PyTorch and the format's own library (no iobench): npy and memmap through
    the DataLoader or tensorclass, with no host transform (iobench's transforms are its own code)."""
    host = c.transform != "none" and c.transform_on is TransformOn.HOST
    return c.format in _PLAIN_DATASETS and c.loader in (LoaderName.DATALOADER, LoaderName.TENSORCLASS) and not host


def _plain_loader(c: RunConfig, on_device: str | None) -> tuple[list[str], list[str], str]:
    """Imports, the Dataset and make_loader() in plain PyTorch (`plain`), and how a batch unpacks."""
    s = c.settings
    tensorclass = c.loader is LoaderName.TENSORCLASS
    source = "data" if tensorclass else "dataset"
    order = "RandomSampler" if c.shuffle else "SequentialSampler"
    args = ["sampler=batches", "batch_size=None", *loader_arguments(c)[2:-1]]
    sampling = [f"    order = {order}(range(len({source})))",
                f"    batches = BatchSampler(order, batch_size={s.batch_size}, drop_last=False)"]  # fmt: skip
    if tensorclass:  # tensordict's own loading: whole batches of the memmap by index, passed through as they are
        body = ["    data = TensorDict.load_memmap(DATASET)", *sampling, "    return DataLoader(", "        data,",
                *(f"        {arg}," for arg in args), "        collate_fn=whole,", "    )"]  # fmt: skip
        dataset = ["def whole(batch: TensorDict) -> TensorDict:",
                   '    """A batch read in one call is one already: passed through as it is."""',
                   "    return batch", "", ""]  # fmt: skip
        unpack = 'features, labels = batch["features"], batch["labels"]'
    else:
        body = ["    dataset = Rows(DATASET)", *sampling, "    return DataLoader(", "        dataset,",
                *(f"        {arg}," for arg in args), "    )"]  # fmt: skip
        dataset, unpack = [*_PLAIN_DATASETS[c.format], "", ""], "features, labels = batch"
    imports = [f"from torch.utils.data import BatchSampler, DataLoader, {order}"]
    imports += ["from tensordict import TensorDict"] if tensorclass or c.format == "memmap" else []
    imports += ["import numpy as np"] if c.format == "npy" and not tensorclass else []
    imports += ["import torch"]  # as ruff sorts a section: `import` lines, then `from` lines, each by module
    imports = sorted(imports, key=lambda line: (line.startswith("from"), line.split()[1]))
    imports += ["", "from iobench.api import device_transform"] if on_device else []
    return imports, [*dataset, "def make_loader() -> DataLoader:", *body], unpack


def best_script(c: RunConfig, measured: str, dataset_dir: Path, device: str) -> str:
    """The configuration as a Python file; `measured` is the figure tune found, quoted in its docstring. npy and
    memmap through the DataLoader or tensorclass paste as plain PyTorch and the format's own library, so a training
    script does not depend on iobench; the others read through iobench's checked readers (`iobench.api`)."""
    tensorclass = c.loader is LoaderName.TENSORCLASS
    host = c.transform if c.transform != "none" and c.transform_on is TransformOn.HOST else "none"
    on_device = c.transform if c.transform != "none" and c.transform_on is TransformOn.DEVICE else None
    opened = [_py(str(dataset_dir.resolve())), _py(c.format)]
    if host != "none":
        opened.append(f"transform={_py(host)}")
    if tensorclass:
        opened.append("tensorclass=True")
    threads = [f"torch.set_num_threads({c.torch_threads})"] if c.torch_threads is not None else []
    unpack = "features, labels = batch.features, batch.labels" if tensorclass else "features, labels = batch"
    move = f"features = features.to(DEVICE, non_blocking={c.settings.non_blocking})"
    torch_import = ["import torch"]
    if plain(c):
        imports, make, unpack = _plain_loader(c, on_device)
        needs = "plain PyTorch and " + ("numpy" if c.format == "npy" else "tensordict")
        opened[0], torch_import = _py(str(dataset_dir.resolve() / c.format)), []  # the format's own folder
    else:
        build = {LoaderName.NODES: _nodes_loader, LoaderName.NATIVE: _native_loader}.get(c.loader, _dataloader)
        imports, make = build(c, opened, on_device)
        needs = "iobench must be installed: its readers check the files"
    lines = [
        f'"""iobench tune\'s best configuration: {c.format} through {c.loader.value}, {measured}.',
        "",
        f"Run it to check the figure here; copy make_loader() into a training script ({needs}).",
        '"""',
        "",
        "import statistics",
        "import time",
        "",
        *torch_import,
        *imports,
        "",
        f"DATASET = {opened[0]}",
        f"DEVICE = torch.device({_py(device)})",
        *threads,
        "",
        "",
        *make,
        "",
        "",
        *_timing_main(c.epochs, measured, unpack, move, on_device),
    ]
    return "\n".join(lines) + "\n"


def _timing_main(epochs: int, measured: str, unpack: str, move: str, on_device: str | None = None) -> list[str]:
    """The script's `__main__`: an untimed warm-up epoch (workers start, the page cache fills), then a few
    epochs timed as tune timed them, the clock stopped after the device is done, and their median beside
    tune's figure (one epoch alone falls outside tune's spread of several by chance)."""
    return [
        'if __name__ == "__main__":',
        f"    TUNE = {_py(measured)}",
        "    loader = make_loader()",
        *([f"    augment = device_transform(DATASET, {_py(on_device)})"] if on_device else []),
        "    rates = []",
        "    # epoch 0 warms up, as tune's rounds did: its figure is printed, not the one to compare",
        f"    for epoch in range({max(3, epochs) + 1}):",
        "        start, seen = time.perf_counter(), 0",
        "        for batch in loader:",
        f"            {unpack}",
        f"            {move}",
        *(["            features = augment(features)"] if on_device else []),
        "            seen += len(features)",
        '        if DEVICE.type == "cuda":',
        "            torch.cuda.synchronize()",
        "        seconds = time.perf_counter() - start",
        '        name = f"epoch {epoch}" if epoch else "warm-up"',
        "        rate = seen / seconds",
        '        print(f"{name}: {seen} samples in {seconds:.2f} s, {rate:,.0f} samples/s")',
        "        if epoch:",
        "            rates.append(rate)",
        "    median = statistics.median(rates)",
        '    print(f"median of the timed epochs: {median:,.0f} samples/s; tune: {TUNE}")',
    ]


def factory_script(request: Any, measured: str, folder: Path, device: str) -> str:
    """tune --dataset-factory's best: the user's function in a DataLoader with the measured settings (the
    folder it was imported from goes first on sys.path, so the script runs from anywhere)."""
    module, _, function = request.factory.partition(":")
    s = request.settings
    args = [f"batch_size={s.batch_size}", f"shuffle={request.shuffle}", *_keywords(s)]
    threads = [f"torch.set_num_threads({request.torch_threads})"] if request.torch_threads is not None else []
    lines = [
        f'"""iobench tune\'s best DataLoader settings for {request.factory}, {measured}.',
        "",
        "Run it to check the figure here; copy make_loader() into a training script.",
        '"""',
        "",
        "import statistics",
        "import sys",
        "import time",
        "",
        "import torch",
        "from torch.utils.data import DataLoader",
        "",
        "from iobench.api import split_batch",
        "",
        f"# where {module} was imported from",
        f"sys.path.insert(0, {_py(str(folder.resolve()))})",
        f"from {module} import {function}  # noqa: E402",
        "",
        f"DEVICE = torch.device({_py(device)})",
        *threads,
        "",
        "",
        "def make_loader() -> DataLoader:",
        "    return DataLoader(",
        f"        {function}(),",
        *(f"        {arg}," for arg in args),
        "    )",
        "",
        "",
        *_timing_main(
            request.epochs,
            measured,
            "features, labels = split_batch(batch)",
            f"features = features.to(DEVICE, non_blocking={s.non_blocking})",
        ),  # fmt: skip
    ]
    return "\n".join(lines) + "\n"


def run_command(c: RunConfig, place: list[str], device: str) -> str:
    """The `iobench run` that measures configuration `c` again where the search measured it (`place`: the
    options naming the data and the store, as typed)."""
    s = c.settings
    args = ["iobench", "run", *place, "--format", c.format, "--loader", c.loader.value, "--device", device,
            "--batch-size", str(s.batch_size), "--num-workers", str(s.num_workers),
            "--cache", c.cache.value]  # fmt: skip
    args += command_flags(s, device.startswith("cuda"))
    args += ["--no-shuffle"] if not c.shuffle else []
    args += ["--step", c.step] if c.step != "none" else []
    args += ["--transform", c.transform, "--transform-on", c.transform_on.value] if c.transform != "none" else []
    args += ["--torch-threads", str(c.torch_threads)] if c.torch_threads is not None else []
    args += [part for k, v in c.format_options for part in ("--format-option", f"{c.format}.{k}={v}")]
    return " ".join(shlex.quote(a) for a in args)
