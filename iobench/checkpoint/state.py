"""The training state `iobench checkpoint` saves: shaped like a transformer's, at DLIO's 14 bytes a parameter (MLPerf
Storage's checkpointing workload): bf16 weights in Llama-like layer shapes (attention h x h, MLP 3.5h x h), and fp32
Adam moments and master weights, plus the non-tensor state a training loop keeps (the step, the RNG states). The
`small` layout is the same bytes as many small tensors (biases, norms, embeddings of a model with many modules).
Made from a seed: a restore is checked bit for bit against a fresh copy, not against the one saved. With `--from`, the
weights are the user's own (a `.safetensors` file, or a `.pt`/`.pth`/`.bin` state dict read with
`torch.load(weights_only=True)`), in their own dtypes; the optimizer's three fp32 groups are made from the seed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

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
    def state_bytes(self) -> int:
        if self.source:
            return sum(math.prod(s) * (d.itemsize + OPTIMIZER_BYTES) for _, s, d in file_weights(self.source))
        return sum(math.prod(s) for s in self.shapes()) * BYTES_PER_PARAM

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
    """(name, shape, dtype) of every floating-point tensor of the user's file, in its order (read lazily: a
    safetensors header, or a mapped torch.load)."""
    return tuple((n, tuple(t.shape), t.dtype) for n, t in _file_tensors(source).items())


def _file_tensors(source: str) -> dict[str, torch.Tensor]:
    """The user's weights by name: a safetensors file's tensors, or a state dict's (nested dicts flattened by dotted
    names, a training checkpoint's "model" or "state_dict" taken), mapped rather than read; never anything but
    tensors (torch.load with weights_only=True)."""
    from iobench.errors import IobenchError

    path = Path(source)
    if not path.is_file():
        raise IobenchError(f"--from {source}: not a file")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        found = load_file(str(path))
    elif path.suffix in TORCH_SUFFIXES:
        try:
            loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except Exception as exc:  # noqa: BLE001 - a file torch cannot read safely, in one line
            raise IobenchError(f"--from {source}: torch.load(weights_only=True) refused it: {_why(exc)}") from None
        if isinstance(loaded, dict):
            loaded = loaded.get("model", loaded.get("state_dict", loaded))
        found = flat_tensors(loaded) if isinstance(loaded, dict) else {}
    else:
        raise IobenchError(f"--from {source}: a .safetensors file or a torch state dict (.pt, .pth, .bin)")
    weights = {k: v.contiguous() for k, v in found.items() if v.is_floating_point() and v.numel() > 0}
    if not weights:
        raise IobenchError(f"--from {source}: no floating-point tensors in it")
    return weights


def _why(exc: Exception) -> str:
    """torch's refusal in a few words: the object that is not weights, else its first line without escapes."""
    import re

    text = str(exc)
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
    if found:
        return f"it holds {found.group(1)}, which is not a tensor (only plain weights are read)"
    first = re.sub(r"\x1b\[[0-9;]*m", "", text.strip().splitlines()[0] if text.strip() else type(exc).__name__)
    return first[:200]


def make_state(spec: StateSpec) -> dict:
    """The state as a training loop's `state_dict()`s: {"model": ..., "optimizer": ..., "step", "rng"}; the same for
    the same spec, whatever machine."""
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
        exp_avg[name] = torch.rand(shape, generator=g, dtype=torch.float32) * 1e-3
        exp_avg_sq[name] = torch.rand(shape, generator=g, dtype=torch.float32) * 1e-6
    rng = torch.Generator().manual_seed(spec.seed + 1).get_state()
    return {"model": model, "optimizer": {"master": master, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq},
            "step": 1000 + spec.seed, "rng": rng}  # fmt: skip


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
