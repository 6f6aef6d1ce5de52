"""Where a measuring command runs and keeps its records: the values every measuring command shares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from iobench.storage.remote import FuseOptions
from iobench.storage.remote.profiles import Profile


@dataclass(frozen=True)
class RunPlace:
    data_dir: Path
    dataset: str | None
    device: str  # as given: auto, cpu, cuda, cuda:N
    results: Path
    read_limit: float | None = None
    cprofile: bool = False  # --profile: one more epoch under cProfile (not `remote`, the network profile)
    size: int | None = None  # --size: the dataset of this many samples (prepared when missing)
    remote: Profile | None = None  # --remote: the formats read from object storage served with this profile
    endpoint_url: str | None = None  # --endpoint-url: the formats read from this S3-compatible store instead
    fuse: FuseOptions | None = None  # --fuse-chunk, --fuse-read-ahead: how a FUSE mount reads objects
    rank_timeout: float = 1800.0  # --rank-timeout: seconds a rank waits for the others at a barrier

    def place_flags(self, dataset: str | None = None) -> list[str]:
        """The options that find this dataset (`dataset`: the one the run found), for a command iobench suggests: the
        data folder where it is not the default, the dataset where the run named it or its size."""
        flags = ["--data-dir", str(self.data_dir)] if self.data_dir != Path("data") else []
        name = self.dataset or (dataset if self.size is not None else None)
        return [*flags, *(["--dataset", name] if name is not None else [])]

    @property
    def object_storage(self) -> bool:
        """The formats are read from object storage (iobench's server, or the store at --endpoint-url)."""
        return self.remote is not None or self.endpoint_url is not None
