"""The accelerators MLPerf Storage emulates, as its benchmark's DLIO workload configurations give them: the bytes of a
sample, the batch, the reader threads, the compute time of one batch on that accelerator, and the accelerator
utilisation a run must keep. Values from mlcommons/storage, `configs/dlio/workload/<name>_<accelerator>.yaml`, the
files MLPerf Storage v3.0 runs (VERSION), at the commits named beside each. DLIO's own repository gives another
resnet50/h100 (argonne-lcf/dlio_benchmark @499a4dc9: batch 64, 0.103 s, 71 MB/s an accelerator, where the benchmark's
is batch 400, 0.224 s, 205 MB/s): MLPerf Storage's question is asked with the benchmark's, and the version is in every
answer and record. The AU where a file gives none is MLPerf Storage's rule for the workload (90% for unet3d and
resnet50, 70% for cosmoflow; retinanet's files give 85%, dlrm's 70%, flux's 80%). A light module: `feed --help` is
made from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from iobench.data.dlio_records import UNET3D, Records

if TYPE_CHECKING:
    from iobench.judge.rules import Closed


@dataclass(frozen=True)
class Workload:
    name: str
    accelerator: str
    sample_bytes: int  # the mean of DLIO's record length (its stdev reproduced by files only, where `records` says)
    batch_size: int
    read_threads: int  # DLIO's read_threads: the loader's workers
    compute_s: float  # DLIO's computation_time: one batch's step on the accelerator
    au: float  # the utilisation a run must keep, every rank
    source: str  # the file and commit the values come from
    records: Records | None = None  # where DLIO's sizes vary: files of them are prepared for --format files
    epochs: int = 5  # the file's train.epochs: what a CLOSED run trains

    @property
    def demand_mb_per_s(self) -> float:
        """What one accelerator reads at full utilisation: a batch's bytes every step."""
        return self.sample_bytes * self.batch_size / self.compute_s / 1e6

    @property
    def key(self) -> str:
        return f"{self.name}/{self.accelerator}"


VERSION = "MLPerf Storage v3.0"  # the benchmark whose workload files these are
_MLC = "mlcommons/storage configs/dlio/workload/"
WORKLOADS: dict[str, Workload] = {
    w.key: w
    for w in (
        Workload("unet3d", "h100", UNET3D.mean_bytes, 7, 4, 0.323, 0.90, _MLC + "unet3d_h100.yaml @7e73663b", UNET3D),
        Workload("unet3d", "a100", UNET3D.mean_bytes, 7, 4, 0.636, 0.90, _MLC + "unet3d_a100.yaml @be18c3e5", UNET3D),
        Workload("resnet50", "h100", 114_660, 400, 8, 0.224, 0.90, _MLC + "resnet50_h100.yaml @ac0424fa"),
        Workload("resnet50", "a100", 114_660, 400, 8, 0.435, 0.90, _MLC + "resnet50_a100.yaml @be18c3e5"),
        Workload("cosmoflow", "h100", 2_828_486, 1, 4, 0.00350, 0.70, _MLC + "cosmoflow_h100.yaml @c25079c2"),
        Workload("cosmoflow", "a100", 2_828_486, 1, 4, 0.00551, 0.70, _MLC + "cosmoflow_a100.yaml @e3ffed05"),
        # retinanet, and B200 (unet3d's B200 step is MLCommons' estimate, H100's halved)
        Workload("unet3d", "b200", UNET3D.mean_bytes, 7, 4, 0.162, 0.90, _MLC + "unet3d_b200.yaml @0d75b417", UNET3D),
        Workload("retinanet", "h100", 153_600, 16, 8, 0.180, 0.85, _MLC + "retinanet_h100.yaml @fa240126"),
        Workload("retinanet", "a100", 153_600, 16, 8, 0.210, 0.85, _MLC + "retinanet_a100.yaml @c8d70b66"),
        Workload("retinanet", "b200", 322_957, 24, 8, 0.04755, 0.85, _MLC + "retinanet_b200.yaml @11460d00", epochs=8),
        # v3.0's newer training workloads (what-if in v3.0's announcement; their CLOSED status is not checked here):
        # dlrm's h100 and a100 files read 512 B npz samples (its b200 file, parquet row groups, is another layout);
        # flux's jpeg sizes vary (stdev 102,400 B), taken at their mean as retinanet's are
        Workload("dlrm", "h100", 512, 8192, 8, 0.005, 0.70, _MLC + "dlrm_h100.yaml @a65ba8c3", epochs=1),
        Workload("dlrm", "a100", 512, 8192, 8, 0.007, 0.70, _MLC + "dlrm_a100.yaml @a65ba8c3", epochs=1),
        Workload("flux", "h100", 307_200, 8, 8, 0.850, 0.80, _MLC + "flux_h100.yaml @7e73663b"),
        Workload("flux", "a100", 307_200, 8, 8, 1.100, 0.80, _MLC + "flux_a100.yaml @bdc54624"),
    )
}
# what a CLOSED run of each reads, and how (the same files: `dataset.format`, `reader.data_loader`;
# Submission_guidelines.md 10.1: neither may change in CLOSED)
CLOSED_READERS = {
    "unet3d": ("npz", "pytorch"),
    "resnet50": ("tfrecord", "tensorflow"),
    "cosmoflow": ("tfrecord", "tensorflow"),
    "retinanet": ("jpeg", "pytorch"),
    "dlrm": ("npz", "pytorch"),
    "flux": ("jpeg", "pytorch"),
}
NAMES = tuple(dict.fromkeys(w.name for w in WORKLOADS.values()))
ACCELERATORS = tuple(dict.fromkeys(w.accelerator for w in WORKLOADS.values()))
CUSTOM = "custom"


def workload_of(name: str, accelerator: str) -> Workload | None:
    """The published workload, or None where DLIO gives none for that pair."""
    return WORKLOADS.get(f"{name}/{accelerator}")


def closed_of(key: str) -> Closed | None:
    """A stored answer's workload (its key, `unet3d/h100`) as its CLOSED definition fixes it; None for a custom one."""
    from iobench.judge.rules import Closed

    w = WORKLOADS.get(key)
    if w is None:
        return None
    fmt, loader = CLOSED_READERS[w.name]
    return Closed(w.batch_size, w.compute_s, w.au, fmt, loader, w.epochs, w.source)


def custom(sample_bytes: int, batch_size: int, step_ms: float, au: float, read_threads: int) -> Workload:
    """The user's own: their data's sample bytes, their batch, their step."""
    return Workload(CUSTOM, "custom", sample_bytes, batch_size, read_threads, step_ms / 1000, au, "--step-ms")
