"""One trial's job: what the session asks of a fresh process (or of every rank), spelled once. The session builds it,
`to_json` carries it on the trial's command line (no secret in it: a store's keys travel in the environment), the
trial reads it back with `from_json`, and the record is made from it and what the trial measured."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from iobench.checkpoint.save_modes import INPLACE
from iobench.checkpoint.state import StateSpec
from iobench.results.checkpoint_record import OPS, SAVE_MODES
from iobench.storage.checkpoints import Place

JOB_OPS = (*OPS, "classify")  # a kill's restore that says which step it found


@dataclass(frozen=True)
class CheckpointJob:
    library: str
    op: str  # save | restore | classify (the kill test's restore)
    spec: StateSpec
    place: Place  # the checkpoint's place on the target
    save_mode: str = INPLACE
    device: str = "cpu"  # where a restore puts the state: host memory, or a CUDA device's
    nproc: int = 1  # processes saving and restoring together, for the libraries that take ranks
    torch_threads: int = 1  # torch's intra-op threads in every process of the trial (each rank's)
    check: bool = True  # a restore: compare the state with a fresh one, bit for bit (after the clock)
    announce: bool = False  # the kill test: say "saving" as the save's clock starts
    saves: int = 2  # a save: the first in the process, then the steady one (a job's next checkpoint)
    candidates: dict[str, int] = field(default_factory=dict)  # classify: outcome name -> the seed that saved it

    def __post_init__(self) -> None:
        if self.op not in JOB_OPS or self.save_mode not in SAVE_MODES or not 1 <= self.saves <= 2:
            raise ValueError(f"not a checkpoint job: {self.op}, {self.save_mode}, {self.saves} saves")

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
        return cls(**{**data, "spec": spec, "place": Place.of_json(data["place"])})
