"""MLPerf Storage's checkpointing workloads (llama3-8b, -70b, -405b, -1t): each model's shape and parallel layout, and
what each rank of that layout writes, file by file, as DLIO writes it.

The shapes are mlcommons/storage's `configs/dlio/workload/llama3_*.yaml` (llama3_8b.yaml @147ed5f4, llama3_70b.yaml
and llama3_405b.yaml @4cfb98a4, llama3_1t.yaml @1d3bbf1c); the layout (TP x PP x DP, the ZeRO stage, the processes of a
CLOSED run) is Table 2 of its Submission_guidelines.md (@03ef5ec, 2.2.1). What a rank writes follows DLIO's
`dlio_benchmark/checkpointing/base_checkpointing.py` (the version that counts KV heads): the transformer's layers
0..L+2 (0 the embedding, L+1 the head, L+2 the final norm) split over the pipeline stages, each layer's tensors split
over the tensor-parallel ranks, and over the data-parallel ranks under ZeRO 3; under ZeRO 1 only the first
data-parallel rank writes the model; every rank writes its share of the fp32 optimizer state (three tensors of the
parameters over every rank, three of 5 x hidden). Summed over every rank this gives Table 2's sizes for 8B (104.7 GiB,
"105 GB"), 70B (911.2 GiB, "912 GB") and 405B (5,292 GiB, "5.29 TB"); 1T comes to 15.1 TiB, where the table says 18 TB
(a test holds each figure).

On one host MLPerf's `subset` mode writes what the first ranks of the layout write (2.2.2); `--scale` keeps that
fraction of the transformer layers (the embedding and the head stay whole) so that a checkpoint fits a small machine,
and the answer says both."""

from __future__ import annotations

from dataclasses import dataclass, replace

MODEL_BYTES, OPTIMIZER_BYTES = 2, 4  # fp16 model, fp32 optimizer (each file's model_datatype, optimizer_datatype)
VOCAB = 128256
CHECKPOINTS = 10  # num_checkpoints_write and _read in every file


@dataclass(frozen=True)
class Llama3:
    """One workload: the model's shape and its parallel layout."""

    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    tensor: int
    pipeline: int
    data: int
    zero: int  # the ZeRO stage, 1 or 3: 3 shards the model over the data-parallel ranks, 1 only the optimizer
    source: str

    @property
    def ranks(self) -> int:
        """The processes of a CLOSED run: TP x PP x DP."""
        return self.tensor * self.pipeline * self.data

    @property
    def model_ranks(self) -> int:
        return self.tensor * self.pipeline


_YAML = "mlcommons/storage configs/dlio/workload"
WORKLOADS = {
    w.name: w
    for w in (
        Llama3("llama3-8b", 32, 4096, 14336, 32, 8, 1, 1, 8, 3, f"{_YAML}/llama3_8b.yaml @147ed5f4, Table 2"),
        Llama3("llama3-70b", 80, 8192, 28672, 128, 8, 8, 1, 8, 3, f"{_YAML}/llama3_70b.yaml @4cfb98a4, Table 2"),
        Llama3("llama3-405b", 126, 16384, 53248, 128, 8, 8, 32, 2, 1, f"{_YAML}/llama3_405b.yaml @4cfb98a4, Table 2"),
        Llama3("llama3-1t", 128, 25872, 98304, 192, 32, 8, 64, 2, 1, f"{_YAML}/llama3_1t.yaml @1d3bbf1c, Table 2"),
    )
}


@dataclass(frozen=True)
class ShardFile:
    """One file a rank writes: its name within a checkpoint's folder and its tensors (key, elements, bytes each)."""

    name: str
    tensors: tuple[tuple[str, int, int], ...]

    @property
    def nbytes(self) -> int:
        return sum(n * size for _, n, size in self.tensors)


def parameters(w: Llama3) -> int:
    """The model's parameters, as DLIO counts them (embedding and head, L layers with grouped K and V, final norm)."""
    h = w.hidden
    kv = h // w.heads * w.kv_heads
    layer = h + h * (h + 2 * kv) + h * h + h + 2 * w.ffn * h + w.ffn * h
    return 2 * VOCAB * h + layer * w.layers + h


def _layer_elements(w: Llama3, index: int) -> list[int]:
    """One layer's tensors' elements on one rank (DLIO's integer divisions)."""
    h, tp = w.hidden, w.tensor
    shard = w.data if w.zero >= 3 else 1
    if index in (0, w.layers + 1):  # embedding, head
        return [h * VOCAB // tp // shard]
    if index == w.layers + 2:  # final norm
        return [h // shard]
    kv = h // w.heads * w.kv_heads
    return [
        h // shard,
        h * (h + 2 * kv) // tp // shard,
        h * h // tp // shard,
        h // shard,
        h * 2 * w.ffn // tp // shard,
        h * w.ffn // tp // shard,
    ]


def _stage_layers(w: Llama3, stage: int) -> range:
    """The layers a pipeline stage holds: the transformer's split as evenly as it goes, the first stage with the
    embedding, the last with the head and the final norm."""
    per, extra = divmod(w.layers, w.pipeline)
    if stage < extra:
        start = stage * (per + 1) + 1
        end = start + per
    else:
        start = extra * (per + 1) + (stage - extra) * per + 1
        end = start + per - 1
    if stage == w.pipeline - 1:
        end = w.layers + 2
    if stage == 0:
        start = 0
    return range(start, end + 1)


def rank_files(w: Llama3, rank: int) -> list[ShardFile]:
    """What rank `rank` of the layout writes into one checkpoint's folder."""
    stage, dp_rank, mp_rank = rank // w.tensor % w.pipeline, rank // w.model_ranks, rank % w.model_ranks
    files = []
    if w.zero == 3 or dp_rank == 0:  # under ZeRO 1 the first data-parallel rank writes the model
        model = [(i, _layer_elements(w, i)) for i in _stage_layers(w, stage)]
        if w.zero < 3 and w.pipeline > 1:
            files += [
                ShardFile(
                    f"layer_{i}-model_{mp_rank}_model_states", tuple((str(k), n, MODEL_BYTES) for k, n in enumerate(e))
                )
                for i, e in model
            ]
        else:
            name = (
                f"model_{mp_rank}_model_states"
                if w.zero < 3
                else f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_model_states"
            )
            files.append(
                ShardFile(name, tuple((f"{i}.{k}", n, MODEL_BYTES) for i, e in model for k, n in enumerate(e)))
            )
    share = parameters(w) // (w.data * w.model_ranks)
    optimizer = tuple((str(k), share if k % 2 == 0 else 5 * w.hidden, OPTIMIZER_BYTES) for k in range(6))
    files.append(ShardFile(f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_optim_states", optimizer))
    return files


def checkpoint_bytes(w: Llama3, ranks: int | None = None) -> int:
    """One checkpoint's bytes over the first `ranks` ranks of the layout (all of them: the whole checkpoint)."""
    return sum(f.nbytes for r in range(w.ranks if ranks is None else ranks) for f in rank_files(w, r))


def scaled(w: Llama3, scale: float) -> Llama3:
    """`scale` of the transformer layers, at least one."""
    return replace(w, layers=max(1, round(w.layers * scale)))
