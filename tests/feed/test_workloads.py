"""feed's workloads are MLPerf Storage v3.0's: each value against the benchmark's own file at the commit it cites
(written out in tests/fixtures/mlperf_storage_v3_workloads.json), the CLOSED readers and epochs included."""

from __future__ import annotations

import json

import pytest

from iobench.feed.workloads import CLOSED_READERS, WORKLOADS, closed_of
from tests.conftest import ROOT

CONFIGS = json.loads((ROOT / "tests" / "fixtures" / "mlperf_storage_v3_workloads.json").read_text())
KEYS = [k for k in CONFIGS if not k.startswith("_")]


@pytest.mark.parametrize("key", KEYS)
def test_a_workload_is_its_files_values(key):
    config, w = CONFIGS[key], WORKLOADS[key]
    assert (w.batch_size, w.read_threads, w.compute_s, w.au) == (
        config["batch_size"],
        config["read_threads"],
        config["computation_time"],
        config["au"],
    )
    assert abs(w.sample_bytes - config["record_length_bytes"]) / config["record_length_bytes"] < 0.001
    assert config["file"] in w.source and config["commit"] in w.source
    assert CLOSED_READERS[w.name] == (config["format"], config["data_loader"]) and w.epochs == config["epochs"]


def test_a_stored_answers_workload_is_found_by_its_key():
    closed = closed_of("unet3d/h100")
    assert closed is not None and (closed.format, closed.data_loader, closed.batch_size) == ("npz", "pytorch", 7)
    assert closed_of("custom/custom") is None


def test_a_closed_run_trains_its_files_epochs():
    dlrm, flux = closed_of("dlrm/h100"), closed_of("flux/a100")
    assert dlrm is not None and (dlrm.epochs, dlrm.batch_size, dlrm.au) == (1, 8192, 0.70)
    assert flux is not None and (flux.epochs, flux.format, flux.compute_s) == (5, "jpeg", 1.100)
    assert closed_of("retinanet/b200").epochs == 8 and closed_of("retinanet/h100").epochs == 5  # per file


def test_every_workload_is_checked_against_its_file():
    assert sorted(KEYS) == sorted(WORKLOADS)
