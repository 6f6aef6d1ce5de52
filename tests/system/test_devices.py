"""--device parsed once (`choices.DeviceChoice`: syntax, no torch) and decided once (`system.devices.device_here`: the
one "auto" rule, a named GPU checked), for a run, torchrun's ranks and checkpoint's trials alike."""

from __future__ import annotations

import pytest
import torch

from iobench.choices import DeviceChoice
from iobench.errors import IobenchError
from iobench.system.devices import device_here


@pytest.mark.parametrize(
    ("text", "kind", "index"), [("auto", "auto", None), (" CPU ", "cpu", None), ("cuda:3", "cuda", 3)]
)
def test_a_choice_is_its_syntax(text, kind, index):
    choice = DeviceChoice(text)
    assert choice.kind == kind and choice.index == index and DeviceChoice(choice) is choice


@pytest.mark.parametrize("text", ["mps", "cuda:", "cuda:x", "cpu:0", "gpu", "cuda:12345", ""])
def test_anything_else_is_refused_in_one_line(text):
    with pytest.raises(IobenchError, match="unknown device") as caught:
        DeviceChoice(text)
    assert "\n" not in str(caught.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only rules")
def test_without_a_gpu_auto_is_the_cpu_and_cuda_is_refused():
    assert device_here("auto") == torch.device("cpu") and device_here("auto", local_rank=1) == torch.device("cpu")
    for text, rank in (("cuda", None), ("cuda:0", None), ("cuda", 0)):
        with pytest.raises(IobenchError, match="no CUDA GPU"):
            device_here(text, rank)
    with pytest.raises(IobenchError, match="rank i uses cuda:LOCAL_RANK"):
        device_here("cuda:1", local_rank=0)  # a named GPU would put every rank on it


def test_auto_is_the_cpu_where_processes_would_share_a_gpu():
    assert device_here("auto", cuda_ok=False) == torch.device("cpu")
