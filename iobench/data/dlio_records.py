"""DLIO's records where their sizes vary: the mean, the stdev its generator draws them with, and what its reader hands
over whatever it read (record_length_resize). unet3d's from argonne-lcf/dlio_benchmark
`dlio_benchmark/configs/workload/unet3d_h100.yaml` @898fd462 (the a100 and b200 files give the same). Light: `feed
--help` and `prepare --help` are made without numpy."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Records:
    mean_bytes: int  # record_length
    stdev_bytes: int  # record_length_stdev (DLIO draws two sides of this: its files' own stdev is about 0.7 of it)
    handed_bytes: int  # record_length_resize: the array its reader returns

    @property
    def files_options(self) -> dict[str, int]:
        """The files format's options that write these sizes."""
        return {"file_bytes": self.mean_bytes, "file_bytes_stdev": self.stdev_bytes}


UNET3D = Records(146_600_628, 68_341_808, 2_097_152)
