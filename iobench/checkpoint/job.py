"""One trial's job: what the session asks of a fresh process (or of every rank), spelled once. The session builds it,
`to_json` carries it on the trial's command line (no secret in it: a store's keys travel in the environment), the
trial reads it back with `from_json`, and the record is made from it and what the trial measured."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from iobench.checkpoint.save_modes import INPLACE
from iobench.checkpoint.state import StateSpec
from iobench.results.checkpoint_record import MAX_KEEP, OPS, SaveMode
from iobench.storage.checkpoints import CheckpointPlace

JOB_OPS = (*OPS, "classify")  # classify: a kill's restore that says which step it found


@dataclass(frozen=True)
class CheckpointJob:
    library: str
    op: str  # save | restore | restart | classify (the kill test's restore)
    spec: StateSpec
    place: CheckpointPlace  # the checkpoint's place on the target
    save_mode: SaveMode = INPLACE
    device: str = "cpu"  # where a restore puts the state: host memory, or a CUDA device's
    nproc: int = 1  # processes saving and restoring together, for the libraries that take ranks
    torch_threads: int = 1  # torch's intra-op threads in every process of the trial (each rank's)
    check: bool = True  # a restore: compare the state with a fresh one, bit for bit (after the clock)
    announce: bool = False  # the kill test: say "saving" as the save's clock starts
    saves: int = 2  # a save: the first in the process, then the steady one (keep:K: K+1, `SaveMode.saves`)
    step: str = "none"  # a save: the training step run beside it (--step: sleep:MS, mlp, module:function); a restart's
    started: float = 0.0  # a restart: when its process was started (time.time(), the parent's clock)
    candidates: dict[str, int] = field(default_factory=dict)  # classify: outcome name -> the seed that saved it

    def __post_init__(self) -> None:
        if self.op not in JOB_OPS or not SaveMode.valid(self.save_mode) or not 1 <= self.saves <= MAX_KEEP + 1:
            raise ValueError(f"not a checkpoint job: {self.op}, {self.save_mode}, {self.saves} saves")
        object.__setattr__(self, "save_mode", SaveMode(self.save_mode))  # from a job's JSON: parsed here, once

    def with_(self, **changes: Any) -> CheckpointJob:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["spec"] = asdict(self.spec)
        out["place"] = self.place.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckpointJob:
        spec = StateSpec(**{k: data["spec"][k] for k in ("params", "layout", "seed", "source")})
        return cls(**{**data, "spec": spec, "place": CheckpointPlace.of_json(data["place"])})
