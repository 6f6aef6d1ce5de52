"""The code `checkpoint --tune` hands over: a save and a restore of the library and save mode it picked, written as
the trials call them (the same library calls, the same fsyncs and `latest` pointer), with a `__main__` block that
saves a state of the measured size in a folder of its own and prints the steady save's median, so the figure can be
checked on the spot (and is, by `--tune` itself, in a fresh process). The functions import nothing of iobench: they
are meant for the user's training code."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from iobench.checkpoint.libraries import DCP_THREADS
from iobench.checkpoint.paste_helpers import FLAT, HELPERS, INPLACE_FOLDER, STEPS, TENSORS
from iobench.checkpoint.state import StateSpec
from iobench.plan.script_text import fitted, py_literal
from iobench.results.checkpoint_record import SaveMode

FIGURE_LINE = "median steady durable save: "  # what the script prints before its figure, read by the check


@dataclass(frozen=True)
class Code:
    """One library's lines: its imports, the body of a save into `folder` (an asynchronous one returns its future),
    the body of a restore from `folder` into `state`."""

    imports: tuple[str, ...]
    save: tuple[str, ...]
    restore: tuple[str, ...]
    flat: bool = False  # uses the dotted-name helpers (a flat file of tensors)


def _dcp(threads: int) -> Code:
    return Code(
        ("import torch.distributed.checkpoint as dcp",),
        (
            "dcp.save(",
            "    state,",
            f"    storage_writer=dcp.FileSystemWriter(folder, thread_count={threads}, sync_files=True),",
            ")",
        ),
        ("dcp.load(state, storage_reader=dcp.FileSystemReader(folder))",),
    )


# Each library's lines as `ruff format` writes them inside a function (double quotes, 88 columns): the pasted code
# passes the user's formatter as it is
TORCH_SAVE = ('torch.save(state, os.path.join(folder, "state.pt"))',)
CODE: dict[str, Code] = {
    "torch": Code(
        (),
        TORCH_SAVE,
        ('_copy_into(state, torch.load(os.path.join(folder, "state.pt"), weights_only=True))',),
    ),
    "torch-mmap": Code(
        (),
        TORCH_SAVE,
        (
            "_copy_into(",
            "    state,",
            '    torch.load(os.path.join(folder, "state.pt"), mmap=True, weights_only=True),',
            ")",
        ),
    ),
    "safetensors": Code(
        ("from safetensors import safe_open", "from safetensors.torch import load_file, save_file"),
        (
            "tensors = {k: v.contiguous() for k, v in _flat(state).items()}",
            "save_file(",
            "    tensors,",
            '    os.path.join(folder, "state.safetensors"),',
            '    metadata={"step": str(state["step"])},',
            ")",
        ),
        (
            'path = os.path.join(folder, "state.safetensors")',
            'with safe_open(path, framework="pt") as f:',
            '    state["step"] = int(f.metadata()["step"])',
            "loaded = load_file(path)",
            "for name, tensor in _flat(state).items():",
            "    tensor.copy_(loaded[name])",
        ),
        flat=True,
    ),
    "dcp": _dcp(1),
    "dcp-threads": _dcp(DCP_THREADS),
    "dcp-async": Code(
        ("import torch.distributed.checkpoint as dcp",),
        (
            "writer = dcp.FileSystemWriter(folder, thread_count=1, sync_files=True)",
            "return dcp.async_save(state, storage_writer=writer)",
        ),
        ("dcp.load(state, storage_reader=dcp.FileSystemReader(folder))",),
    ),
    "tensordict": Code(
        ("from tensordict import TensorDict",),
        (
            "flat = {_td_key(k): v for k, v in _flat(state).items()}",
            'flat["step"] = torch.tensor(state["step"])',
            'TensorDict(flat, batch_size=[]).memmap(os.path.join(folder, "state"), num_threads=4)',
        ),
        (
            'loaded = TensorDict.load_memmap(os.path.join(folder, "state"))',
            'state["step"] = int(loaded["step"])',
            "for name, tensor in _flat(state).items():",
            "    tensor.copy_(loaded[_td_key(name)])",
        ),
        flat=True,
    ),
}
PASTED = tuple(CODE)  # the libraries --tune can hand over as code (the others are measured by `checkpoint` alone)


def checkpoint_script(
    library: str,
    mode: str,
    spec: StateSpec,
    figure: str,
    seconds: float,
    folder: str,
    torch_threads: int,
    rounds: int = 3,
) -> str:
    """The whole script for `library` saving in `mode`; `figure`: what tune measured, in words, for the docstring;
    `seconds`: its steady durable save, printed beside the script's own; it saves under a new folder in `folder`."""
    code = CODE[library]
    mode = SaveMode(mode)
    kept = 0 if mode.inplace else mode.steps_kept
    head = _head(library, mode, figure, seconds, code, kept)
    main = _main(mode, spec, folder, torch_threads, rounds, kept)
    body = "\n".join(head) + "\n" + HELPERS + (FLAT if code.flat else "") + (STEPS if kept else INPLACE_FOLDER)
    return body + "\n".join(_functions(code, kept) + TENSORS + main) + "\n"


def _head(library: str, mode: str, figure: str, seconds: float, code: Code, kept: int) -> list[str]:
    """The docstring, the imports and the constants."""
    return [
        f'"""Saving and restoring a training state as `iobench checkpoint --tune` picked it here: {library}, '
        f"{mode} saves.",
        *textwrap.wrap(f"{figure}.", 116),
        "",
        *textwrap.wrap(
            "Paste save_checkpoint, finish_checkpoint"
            + (", remove_old" if kept else "")
            + " and restore_checkpoint (and the helpers above them) into your training code. Run this file to check "
            'the figure: it saves a state of the measured size in a folder of its own, which it removes."""',
            116,
        ),
        "",
        "import os",
        *(["import re"] if kept else []),
        "import shutil",
        "import stat",
        "import statistics",
        "import tempfile",
        "import time",
        "",
        "import torch",
        *code.imports,
        "",
        *([f"KEEP = {kept}  # checkpoints kept: the newest KEEP steps"] if kept else []),
        f"TUNE_SECONDS = {seconds:.4f}  # tune's figure: the steady save, durable",
        "",
    ]


def _functions(code: Code, kept: int) -> list[str]:
    """The functions to paste: the save, its finish (durable, published), the restore."""
    asynchronous = any(line.startswith("return ") for line in code.save)
    save_body = [f"    {line}" for line in code.save]
    if not asynchronous:
        save_body.append("    return None")
    publish = ["    _publish(root, folder)"] if kept else []
    return [
        "",
        "",
        "def save_checkpoint(state: dict, root: str, step: int) -> object:",
        '    """Starts saving `state` as step `step` under `root`; finish_checkpoint completes it (an asynchronous',
        '    save writes beside training until then)."""',
        "    folder = _folder(root, step)",
        "    _new_step(root, folder)",
        *save_body,
        "",
        "",
        "def finish_checkpoint(root: str, step: int, pending: object) -> None:",
        '    """The save durable and, where steps are kept, published: call it before the next save."""',
        "    if pending is not None:",
        "        pending.result()",
        "    folder = _folder(root, step)",
        "    _fsync_tree(folder)",
        "    _fsync(root)",
        *publish,
        "",
        "",
        "def restore_checkpoint(root: str, state: dict) -> dict:",
        '    """The latest checkpoint read into `state` (your model\'s and optimizer\'s state, as load_state_dict',
        '    copies it)."""',
        "    folder = _latest(root)",
        *[f"    {line}" for line in code.restore],
        "    return state",
    ]


def _weights(spec: StateSpec) -> list[str]:
    """The measured state's weights as the script's table: name, shape, the model's dtype (the user's file's with
    --from, else bf16)."""
    from iobench.checkpoint.state import file_weights, weight_names

    if spec.source:
        rows = [(n, shape, str(dtype).removeprefix("torch.")) for n, shape, dtype in file_weights(spec.source)]
    else:
        rows = [(n, shape, "bfloat16") for n, shape in weight_names(spec)]
    return [f"    ({py_literal(name)}, {tuple(shape)!r}, {py_literal(dtype)})," for name, shape, dtype in rows]


def _main(mode: str, spec: StateSpec, folder: str, torch_threads: int, rounds: int, kept: int) -> list[str]:
    """The check: a stand-in state of the measured size made here (the script needs no iobench), the saves before the
    steady one, `rounds` steady saves timed, a restore into a state already in memory checked bit for bit."""
    warm = SaveMode(mode).saves - 1
    return [
        "",
        "",
        "WEIGHTS = [  # the measured state's weights: name, shape, the model's dtype",
        *_weights(spec),
        "]",
        "",
        "",
        "def stand_in_state(seed: int = 0) -> dict:",
        '    """A state of the measured size as `iobench checkpoint` makes it (the model\'s weights, fp32 master',
        '    weights and Adam moments, the step, the RNG state): your own state_dicts take its place."""',
        "    g = torch.Generator().manual_seed(seed)",
        "    model, master, exp_avg, exp_avg_sq = {}, {}, {}, {}",
        "    for name, shape, dtype in WEIGHTS:",
        "        weights = torch.randn(shape, generator=g, dtype=torch.float32)",
        "        model[name] = weights.to(getattr(torch, dtype))",
        "        master[name] = weights",
        "        exp_avg[name] = torch.rand(shape, generator=g, dtype=torch.float32) * 1e-3",
        "        exp_avg_sq[name] = torch.rand(shape, generator=g, dtype=torch.float32) * 1e-6",
        '    optimizer = {"master": master, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}',
        "    rng = torch.Generator().manual_seed(seed + 1).get_state()",
        '    return {"model": model, "optimizer": optimizer, "step": 1000 + seed, "rng": rng}',
        "",
        "",
        "def _like(state: dict) -> dict:",
        '    """A state of the same shapes already in memory (every page touched), as a resuming job\'s model is."""',
        "    return {",
        "        k: _like(v)",
        "        if isinstance(v, dict)",
        "        else torch.zeros_like(v)",
        "        if isinstance(v, torch.Tensor)",
        "        else 0",
        "        for k, v in state.items()",
        "    }",
        "",
        "",
        'if __name__ == "__main__":',
        f"    torch.set_num_threads({torch_threads})",
        f"    state = stand_in_state({spec.seed})  # a stand-in for your state",
        *fitted(4, "parent = tempfile.mkdtemp", ['prefix="iobench-tuned-"', f"dir={py_literal(folder)}"]),
        "    try:",
        '        root = os.path.join(parent, "checkpoint")',
        "        os.mkdir(root)",
        "        seconds = []",
        f"        for step in range(1, {warm + rounds + 1}):  # the first {warm} as the trials' before the steady one",
        "            start = time.perf_counter()",
        "            finish_checkpoint(root, step, save_checkpoint(state, root, step))",
        "            took = time.perf_counter() - start",
        *(["            remove_old(root)"] if kept else []),
        f"            if step > {warm}:",
        "                seconds.append(took)",
        "        into = _like(state)",
        "        start = time.perf_counter()",
        "        restored = restore_checkpoint(root, into)",
        "        restore_s = time.perf_counter() - start",
        '        same = restored["step"] == state["step"] and all(',
        "            torch.equal(a, b)",
        "            for a, b in zip(_tensors(restored), _tensors(state), strict=True)",
        "        )",
        "    finally:",
        "        # made by mkdtemp above, never a link",
        "        if stat.S_ISDIR(os.lstat(parent).st_mode):",
        "            shutil.rmtree(parent)",
        "    median = statistics.median(seconds)",
        "    print(",
        f'        f"{FIGURE_LINE}{{median:.3f}} s over {{len(seconds)}} saves; tune: {{TUNE_SECONDS:.3f}} s; "',
        "        f\"restored {'exactly' if same else 'WITH DIFFERENCES'} in {restore_s:.3f} s (warm)\"",
        "    )",
        "    if not same:",
        '        raise SystemExit("the state restored differs from the state saved")',
    ]
