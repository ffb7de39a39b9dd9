"""`resolve_gpus`, what `pytriton serve` calls to place a model: `--gpus` as typed, or the default for the device
kind the model was declared for (GPU discovery faked in this process)."""

from __future__ import annotations

import json

import click
import pytest

from pytriton._cli_model import resolve_gpus
from pytriton.core import gpus
from tests._fake_nvml import fake_gpus, install_fake_pynvml


@pytest.fixture
def fake_nvml(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield install_fake_pynvml(monkeypatch)
    gpus.physical_gpus.cache_clear()


def test_a_model_declared_for_gpu_goes_on_each_gpu(fake_nvml, monkeypatch):
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", json.dumps(fake_gpus(3)))
    assert resolve_gpus("m", None, "gpu") == [0, 1, 2]
    assert resolve_gpus("m", "1", "gpu") == [1]  # the command line overrides the declaration
    assert resolve_gpus("m", "all", None) == [0, 1, 2]
    assert resolve_gpus("m", "2,0", "cpu") == [2, 0]


def test_a_model_not_declared_for_gpu_looks_for_no_gpu(fake_nvml, monkeypatch):
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", json.dumps(fake_gpus(2)))
    monkeypatch.setattr(fake_nvml, "nvmlInit", lambda: pytest.fail("NVML opened for a CPU model"))
    assert resolve_gpus("m", None, None) == []
    assert resolve_gpus("m", None, "cpu") == []


def test_a_model_declared_for_gpu_on_a_machine_without_one(fake_nvml, monkeypatch):
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", "[]")
    with pytest.raises(click.BadParameter) as raised:
        resolve_gpus("m", None, "gpu")
    assert "instance group m_gpus of model m has kind KIND_GPU but no GPUs are available" in raised.value.format_message()
