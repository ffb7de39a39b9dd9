"""`resolve_gpus`, what `pytriton serve` calls to place a model: `--gpus` as typed, or the default for the device
kind the model was declared for (GPU discovery faked in this process)."""

from __future__ import annotations

import json

import click
import pytest

from pytriton.cli.model import resolve_gpus
from pytriton.config import gpus
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
    """The message blames the declaration (not a --gpus nobody gave) and says how to run on CPU."""
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", "[]")
    with pytest.raises(click.UsageError) as raised:
        resolve_gpus("m", None, "gpu")
    message = raised.value.format_message()
    assert message.startswith("model 'm' is declared for GPU (device='gpu') but no GPU was found (neither NVML nor ")
    assert message.endswith("; serve it on CPU with --device cpu")
    assert "--gpus" not in message
    with pytest.raises(click.UsageError) as raised:
        resolve_gpus("m", None, "gpu", device_flag=True)
    assert raised.value.format_message().startswith("model 'm' is served on GPU (--device gpu) but no GPU was found")
    assert resolve_gpus("m", None, "cpu", device_flag=True) == []  # --device cpu over a GPU declaration


def test_gpus_given_on_a_machine_without_one_says_to_drop_them(fake_nvml, monkeypatch):
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", "[]")
    for gpus in ("0,1", "all"):
        with pytest.raises(click.BadParameter) as raised:
            resolve_gpus("m", gpus, None)
        assert raised.value.format_message().endswith("; drop --gpus to run on CPU")
        with pytest.raises(click.BadParameter) as raised:
            resolve_gpus("m", gpus, "gpu")  # declared for GPU: dropping --gpus alone would still want one
        assert raised.value.format_message().endswith("; drop --gpus and give --device cpu to run on CPU")


def test_device_cpu_and_gpus_disagree(fake_nvml):
    with pytest.raises(click.UsageError) as raised:
        resolve_gpus("m", "0", "cpu", device_flag=True)
    assert raised.value.format_message() == "model 'm': --device cpu and --gpus 0 disagree; give one of them"


@pytest.mark.parametrize("text", ["1_0", "\u0661", "0,\uff11", "0x1", "+", ""])
def test_gpu_ids_are_ascii_digits(fake_nvml, monkeypatch, text):
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", json.dumps(fake_gpus(11)))
    with pytest.raises(click.BadParameter) as raised:
        resolve_gpus("m", text, None)
    assert f"GPU ids are comma-separated integers (or 'all'), got '{text}'" in raised.value.format_message()


def test_spaces_around_gpu_ids_are_fine(fake_nvml, monkeypatch):
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", json.dumps(fake_gpus(2)))
    assert resolve_gpus("m", " 1 , 0 ", None) == [1, 0]
