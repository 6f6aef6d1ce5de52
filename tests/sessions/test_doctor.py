"""`iobench doctor`: the checks on this machine, and the GPU verdicts on synthetic timings."""

from __future__ import annotations

import sys

import pytest

from iobench.sessions.doctor import Status, cgroups, clock_verdict, overlap_verdict, page_cache, pinned_verdict


@pytest.mark.long
def test_doctor_runs_here_and_says_what_it_found(tmp_path, cli):
    r = cli("doctor", "--data-dir", tmp_path, "--idle-seconds", "1", "--device", "cpu")
    assert r.code == 0, r.err
    for check in ("cores and --num-workers", "drop_caches", "cgroups", "eviction", "warm page cache", "GPU path"):
        assert check in r.out, check
    assert "after eviction by fadvise" in r.out and "scripts/gpu_smoke.sh" in r.out
    assert list(tmp_path.iterdir()) == [], "the probe file is removed"


def test_a_machine_that_reclaims_idle_page_cache_is_named(tmp_path):
    from iobench.storage.local.page_cache import evict

    def reclaim(seconds):  # what the VM's monitor does to memory idle for a minute
        for probe in tmp_path.iterdir():
            evict([probe], "fadvise")

    eviction, warm = page_cache(tmp_path, 75, wait=reclaim)
    assert eviction.status is Status.OK
    assert warm.status is Status.WARN and "reclaims idle page cache" in warm.detail and "after 75 s idle" in warm.detail
    eviction, warm = page_cache(tmp_path, 0.01)
    assert warm.status is Status.OK and "stayed" in warm.detail


def test_cgroup_support_is_read_from_the_mounts(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "tasks").write_text("")
    (tmp_path / "cgroup.controllers").write_text("cpu io memory\n")
    finding = cgroups(tmp_path)
    assert "v1 memory (writable)" in finding.detail and "memory, io" in finding.detail
    assert cgroups(tmp_path / "none").status is Status.WARN


def test_gpu_verdicts_on_synthetic_timings():
    assert clock_verdict(0.0001, 0.02).status is Status.OK
    assert clock_verdict(0.019, 0.02).status is Status.WARN
    assert pinned_verdict(6000, 12000).status is Status.OK and pinned_verdict(6000, 6100).status is Status.WARN
    assert overlap_verdict(0.019, 0.0001, 0.02).status is Status.OK
    assert overlap_verdict(0.0001, 0.0001, 0.02).status is Status.WARN
    assert "seen to hold on an NVIDIA H100" in clock_verdict(0.0001, 0.02).detail


def test_a_torchvision_that_does_not_import_beside_torch_is_one_line(monkeypatch):
    """`.[formats]` installs torchvision 0.28.0 (through LitData): beside a CPU torch it is a CUDA build, fails on
    import (`operator torchvision::nms does not exist`) and `pip check` says nothing. doctor says so in one line;
    where it imports, or is not there, it says that."""
    import importlib.util
    import subprocess

    from iobench.sessions import doctor

    found = doctor.torchvision()
    assert found.check == "torchvision" and "\n" not in found.detail
    if importlib.util.find_spec("torchvision") is None:
        assert found.status is doctor.Status.OK and "not installed" in found.detail
        return
    imports = subprocess.run([sys.executable, "-c", "import torchvision"], capture_output=True).returncode == 0
    assert (found.status is doctor.Status.OK) == imports, found
    if not imports:
        assert "does not import beside torch" in found.detail
