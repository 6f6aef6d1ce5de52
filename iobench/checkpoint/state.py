"""The training state `iobench checkpoint` saves: shaped like a transformer's, at DLIO's 14 bytes a parameter (MLPerf
Storage's checkpointing workload): bf16 weights in Llama-like layer shapes (attention h x h, MLP 3.5h x h), and fp32
Adam moments and master weights, plus the non-tensor state a training loop keeps (the step, the RNG states). The
`small` layout is the same bytes as many small tensors (biases, norms, embeddings of a model with many modules).
Made from a seed: a restore is checked bit for bit against a fresh copy, not against the one saved."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

BYTES_PER_PARAM = 14  # bf16 weights (2) + fp32 master weights, exp_avg and exp_avg_sq (4 + 4 + 4)
LAYOUTS = ("llama", "small")


@dataclass(frozen=True)
class StateSpec:
    params: int  # parameters of the model (weights); the state is BYTES_PER_PARAM times this in bytes
    layout: str = "llama"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.params < 1024:
            raise ValueError(f"--params: at least 1024 parameters, got {self.params}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"--layout must be {' or '.join(LAYOUTS)}, got {self.layout!r}")

    @property
    def state_bytes(self) -> int:
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
    """Each weight's name (seven a layer: q, k, v, o, gate, up, down) and shape."""
    return [(f"layers.{i // 7}.w{i % 7}", shape) for i, shape in enumerate(spec.shapes())]


def make_state(spec: StateSpec) -> dict:
    """The state as a training loop's `state_dict()`s: {"model": ..., "optimizer": ..., "step", "rng"}; the same for
    the same spec, whatever machine."""
    g = torch.Generator().manual_seed(spec.seed)
    model, master, exp_avg, exp_avg_sq = {}, {}, {}, {}
    for name, shape in weight_names(spec):
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
