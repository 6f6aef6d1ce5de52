"""The training state `iobench checkpoint` saves: shaped like a transformer's, at DLIO's 14 bytes a parameter (MLPerf
Storage's checkpointing workload): bf16 weights in Llama-like layer shapes (attention h x h, MLP 3.5h x h), and fp32
Adam moments and master weights, plus the non-tensor state a training loop keeps (the step, the RNG states). The
`small` layout is the same bytes as many small tensors (biases, norms, embeddings of a model with many modules).
Made from a seed: a restore is checked bit for bit against a fresh copy, not against the one saved. With `--from`, the
weights are the user's own (a `.safetensors` file, or a `.pt`/`.pth`/`.bin` state dict read with
`torch.load(weights_only=True)`), in their own dtypes; the optimizer's three fp32 groups are made from the seed."""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from iobench.errors import IobenchError

BYTES_PER_PARAM = 14  # bf16 weights (2) + fp32 master weights, exp_avg and exp_avg_sq (4 + 4 + 4)
OPTIMIZER_BYTES = 12  # the fp32 master weights and two Adam moments a parameter
LAYOUTS = ("llama", "small")
FROM = "from"  # the layout of a state whose weights come from the user's file
TORCH_SUFFIXES = (".pt", ".pth", ".bin")


@dataclass(frozen=True)
class StateSpec:
    params: int  # parameters of the model (weights); the state is BYTES_PER_PARAM times this in bytes
    layout: str = "llama"
    seed: int = 0
    source: str = ""  # the user's weights (--from: a resolved local file); "" for generated ones

    def __post_init__(self) -> None:
        if self.source:
            object.__setattr__(self, "layout", FROM)
            return
        if self.params < 1024:
            raise ValueError(f"--params: at least 1024 parameters, got {self.params}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"--layout must be {' or '.join(LAYOUTS)}, got {self.layout!r}")

    @classmethod
    def of_file(cls, path: Path, seed: int = 0) -> StateSpec:
        """The state around the weights of the user's file, its parameters counted from it."""
        source = str(path.resolve())
        return cls(sum(math.prod(shape) for _, shape, _ in file_weights(source)), FROM, seed, source)

    @property
    def described(self) -> str:
        """Where its weights come from, in words: the layout, or the user's file by name (`from model.pt`)."""
        return f"from {Path(self.source).name}" if self.source else self.layout

    def with_seed(self, seed: int) -> StateSpec:
        return StateSpec(self.params, self.layout, seed, self.source)

    @property
    def state_bytes(self) -> int:
        """Counted, not listed: the shapes of 1e20 parameters are never made (a list of them grew 53 MB/s until the
        OOM killer came; the size is checked against memory first)."""
        if self.source:
            return sum(math.prod(s) * (d.itemsize + OPTIMIZER_BYTES) for _, s, d in file_weights(self.source))
        return self.params * BYTES_PER_PARAM  # the shapes hold exactly `params` parameters

    def shapes(self) -> list[tuple[int, ...]]:
        """The weights' shapes: Llama-like layers of hidden size h (q, k, v, o: h x h; gate, up: 3.5h x h; down:
        h x 3.5h) until the parameters are spent; `small`: tensors of 4,096 parameters."""
        if self.layout == "small":
            n, rest = divmod(self.params, 4096)
            return [(64, 64)] * n + ([(rest,)] if rest else [])
        h = 4096 if self.params >= 2e9 else 1024 if self.params >= 5e7 else 256
        ffn = h * 7 // 2
        layer = [(h, h)] * 4 + [(ffn, h), (ffn, h), (h, ffn)]
        shapes, left = [], self.params
        while left > 0:
            for shape in layer:
                size = math.prod(shape)
                if size > left:
                    shapes.append((left,))
                    return shapes
                shapes.append(shape)
                left -= size
        return shapes


def weight_names(spec: StateSpec) -> list[tuple[str, tuple[int, ...]]]:
    """Each weight's name (seven a layer: q, k, v, o, gate, up, down; the file's own names with --from) and shape."""
    if spec.source:
        return [(name, shape) for name, shape, _ in file_weights(spec.source)]
    return [(f"layers.{i // 7}.w{i % 7}", shape) for i, shape in enumerate(spec.shapes())]


def weight_dtype(spec: StateSpec, name: str) -> torch.dtype:
    """The model weights' dtype: bf16, or the file's own with --from."""
    if spec.source:
        return next(d for n, _, d in file_weights(spec.source) if n == name)
    return torch.bfloat16


@lru_cache(maxsize=4)
def file_weights(source: str) -> tuple[tuple[str, tuple[int, ...], torch.dtype], ...]:
    """(name, shape, dtype) of every floating-point tensor of the user's file, in its order, read without loading the
    weights: a safetensors header (a 40 GB file is sized, not mapped), or a mapped torch.load."""
    if Path(source).suffix == ".safetensors":
        return tuple(
            (n, shape, d) for n, shape, d in _safetensors_header(source) if d.is_floating_point and math.prod(shape) > 0
        )
    return tuple((n, tuple(t.shape), t.dtype) for n, t in _file_tensors(source).items())


MAX_HEADER_BYTES = 100 * 2**20  # safetensors' own bound on its JSON header
DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}


def _safetensors_header(source: str) -> list[tuple[str, tuple[int, ...], torch.dtype]]:
    """(name, shape, dtype) of each tensor, from the header alone, checked as safetensors checks it (a length within
    the file, JSON of bounded depth, shapes and offsets that agree and lie within the data). safe_open maps the whole
    file: a 40 GB sparse one failed with "Cannot allocate memory" before its size could be refused."""
    from iobench.system.fsutil import open_regular, parse_json

    def bad(why: str) -> IobenchError:
        return IobenchError(f"--from {source}: not a safetensors file iobench can read ({why})")

    try:
        with os.fdopen(open_regular(source), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise bad("shorter than its header's length")
            (length,) = struct.unpack("<Q", head)
            if not 2 <= length <= min(MAX_HEADER_BYTES, size - 8):
                raise bad(f"a header of {length:,} bytes in a file of {size:,}")
            meta = parse_json(f.read(length), source, MAX_HEADER_BYTES)
    except OSError as exc:
        raise bad(exc.strerror or str(exc)) from None
    except ValueError as exc:
        raise bad(str(exc).rpartition(": ")[2][:100]) from None
    if not isinstance(meta, dict):
        raise bad("its header is not a JSON object")
    data, found, spans = size - 8 - length, [], []
    for name, entry in meta.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or entry.get("dtype") not in DTYPE_BYTES:
            raise bad(f"tensor {name[:60]!r} has no dtype iobench reads")
        shape, offsets = entry.get("shape"), entry.get("data_offsets")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise bad(f"tensor {name[:60]!r} has a shape that is not a list of sizes")
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(isinstance(o, int) for o in offsets)
            and 0 <= offsets[0] <= offsets[1] <= data
        ):
            raise bad(f"tensor {name[:60]!r} lies outside the file's data")
        if math.prod(shape) * DTYPE_BYTES[entry["dtype"]] != offsets[1] - offsets[0]:
            raise bad(f"tensor {name[:60]!r}: its shape does not match its bytes")
        found.append((name, tuple(shape), _dtype(entry["dtype"], source)))
        spans.append((offsets[0], offsets[1], name))
    spans.sort()
    for (_, end, before), (start, _, name) in zip(spans, spans[1:], strict=False):
        if start != end:  # safetensors reads the tensors back to back: an overlap or a gap is refused by it, later
            raise bad(f"tensors {before[:40]!r} and {name[:40]!r} {'overlap' if start < end else 'leave a gap'}")
    return found


def _dtype(text: str, source: str) -> torch.dtype:
    names = {
        "F64": torch.float64,
        "F32": torch.float32,
        "F16": torch.float16,
        "BF16": torch.bfloat16,
        "F8_E4M3": getattr(torch, "float8_e4m3fn", None),
        "F8_E5M2": getattr(torch, "float8_e5m2", None),
        "I64": torch.int64,
        "I32": torch.int32,
        "I16": torch.int16,
        "I8": torch.int8,
        "U8": torch.uint8,
        "BOOL": torch.bool,
    }
    dtype = names.get(text)
    if dtype is None:
        raise IobenchError(f"--from {source}: a tensor of dtype {text[:20]!r}, which iobench does not read")
    return dtype


class _refused_in_one_line:  # noqa: N801 - used as a `with` block
    """A file safetensors cannot read (a header too long, bad JSON, offsets past the end, a pickle under the name) is
    one line naming the file, not SafetensorError's traceback."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: object) -> bool:
        if exc is None or isinstance(exc, KeyboardInterrupt | SystemExit | IobenchError):
            return False
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise IobenchError(f"--from {self.source}: not a safetensors file iobench can read ({first})") from None


def _file_tensors(source: str) -> dict[str, torch.Tensor]:
    """The user's weights by name: a safetensors file's tensors, or a state dict's (nested dicts flattened by dotted
    names, a training checkpoint's "model" or "state_dict" taken), mapped rather than read; never anything but
    tensors (torch.load with weights_only=True)."""
    path = Path(source)
    if not path.is_file():
        raise IobenchError(f"--from {source}: not a file")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        with _refused_in_one_line(source):
            found = load_file(str(path))
    elif path.suffix in TORCH_SUFFIXES:
        found = _torch_weights(path)
    else:
        raise IobenchError(f"--from {source}: a .safetensors file or a torch state dict (.pt, .pth, .bin)")
    weights = {k: v.contiguous() for k, v in found.items() if v.is_floating_point() and v.numel() > 0}
    if not weights:
        raise IobenchError(f"--from {source}: no floating-point tensors in it")
    return weights


def _torch_weights(path: Path) -> dict[str, torch.Tensor]:
    """A state dict's tensors, read with weights_only=True (mapped where the file is torch.save's zip; a legacy
    pickle is read whole: it cannot be mapped)."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Detected pickle protocol 4": the refusal below says what matters
            try:
                loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as exc:
                if "mmap can only be used" not in str(exc):
                    raise
                loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a file torch cannot read safely, in one line
        raise IobenchError(f"--from {path}: torch.load(weights_only=True) refused it: {_why(exc)}") from None
    if isinstance(loaded, dict):
        loaded = loaded.get("model", loaded.get("state_dict", loaded))
    return flat_tensors(loaded) if isinstance(loaded, dict) else {}


def _why(exc: Exception) -> str:
    """torch's refusal in a few words: the object that is not weights; never its advice to load with
    weights_only=False, which would run whatever the file holds."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    found = re.search(r"GLOBAL ([\w.]+)", text)  # "Unsupported global: GLOBAL x.y", "unsupported GLOBAL x.y whose..."
    if found:
        return (
            f"it holds {found.group(1)}, which is not a tensor: loading it any other way would run what the file names"
        )
    operand = re.search(r"Unsupported operand (\d+)", text)
    if operand:
        return f"not a file of plain weights (its pickle uses opcode {operand.group(1)}, refused)"
    lines = [x.strip() for x in text.splitlines() if x.strip() and "weights_only" not in x and "trust" not in x]
    return (lines[0] if lines else type(exc).__name__)[:200]


def make_state(spec: StateSpec) -> dict:
    """The state as a training loop's `state_dict()`s: {"model": ..., "optimizer": ..., "step", "rng"}; the same for
    the same spec, whatever machine. Made without temporaries (scaled in place): a freed temporary left a hole of
    3-23 MB in glibc's heap, by chance per process, and a DCP restore into that state read 0.245 s or 0.27 s (0.25
    GiB) by which one it got, one side of the loops cross-check more often than the other."""
    g = torch.Generator().manual_seed(spec.seed)
    own = _file_tensors(spec.source) if spec.source else {}  # read once: its names and shapes are the weights'
    model, master, exp_avg, exp_avg_sq = {}, {}, {}, {}
    for name, shape in [(n, tuple(w.shape)) for n, w in own.items()] if own else weight_names(spec):
        if own:
            model[name] = own[name].clone()
            weights = own[name].float()
        else:
            weights = torch.randn(shape, generator=g, dtype=torch.float32)
            model[name] = weights.to(torch.bfloat16)
        master[name] = weights
        exp_avg[name] = torch.rand(shape, generator=g, dtype=torch.float32).mul_(1e-3)
        exp_avg_sq[name] = torch.rand(shape, generator=g, dtype=torch.float32).mul_(1e-6)
    rng = torch.Generator().manual_seed(spec.seed + 1).get_state()
    return {
        "model": model,
        "optimizer": {"master": master, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq},
        "step": 1000 + spec.seed,
        "rng": rng,
    }


def flat_tensors(state: dict, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor of the state by its dotted path (what safetensors and a TensorDict store)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat_tensors(value, f"{path}."))
        elif isinstance(value, torch.Tensor):
            out[path] = value
    return out


def unflatten(flat: dict[str, torch.Tensor], step: int) -> dict:
    """`flat_tensors` undone, the step put back (the RNG state is a tensor among them)."""
    state: dict = {"step": step}
    for path, tensor in flat.items():
        node = state
        *parents, leaf = _split(path)
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = tensor
    return state


def _split(path: str) -> list[str]:
    """model.layers.3.w1 -> [model, layers.3.w1]; optimizer.exp_avg.layers.3.w1 -> [optimizer, exp_avg, ...]."""
    head, _, rest = path.partition(".")
    if not rest:
        return [head]
    if head == "optimizer":
        group, name = rest.split(".", 1)
        return [head, group, name]
    return [head, rest]


def differences(restored: dict, expected: dict) -> list[str]:
    """Where a restored state is not the expected one, bit for bit (keys, shapes, dtypes, values, the step and RNG
    states); empty when it is exact."""
    a, b = flat_tensors(restored), flat_tensors(expected)
    found = [f"missing {k}" for k in b.keys() - a.keys()] + [f"unexpected {k}" for k in a.keys() - b.keys()]
    for key in sorted(a.keys() & b.keys()):
        x, y = a[key], b[key]
        if x.dtype != y.dtype or x.shape != y.shape:
            found.append(f"{key}: {x.dtype} {tuple(x.shape)}, expected {y.dtype} {tuple(y.shape)}")
        elif not torch.equal(x.cpu(), y):
            found.append(f"{key}: values differ")
    if restored.get("step") != expected.get("step"):
        found.append(f"step {restored.get('step')}, expected {expected.get('step')}")
    return found


def make_state_shapes(spec: StateSpec) -> dict:
    """The state's structure with zero tensors (no random numbers drawn: cheap)."""
    model, master, exp_avg, exp_avg_sq = {}, {}, {}, {}
    for name, shape in weight_names(spec):
        model[name] = torch.zeros(shape, dtype=weight_dtype(spec, name))
        master[name], exp_avg[name], exp_avg_sq[name] = (torch.zeros(shape) for _ in range(3))
    rng = torch.Generator().get_state()
    return {
        "model": model,
        "optimizer": {"master": master, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq},
        "step": 0,
        "rng": torch.zeros_like(rng),
    }


def initialised_state(spec: StateSpec) -> dict:
    """What a resuming job has before it loads: its model and optimizer made and initialised (random values of another
    seed, overwritten by the load). Zeros made cheaply instead left the allocator cold: DCP with 4 threads loaded
    0.72x as fast as its own loop, which loads into the state it made."""
    from dataclasses import replace

    return make_state(replace(spec, seed=spec.seed + 7))
