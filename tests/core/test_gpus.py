"""GPU discovery (NVML through the fake pynvml, the driver's files), CUDA_VISIBLE_DEVICES, and which GPUs a model
gets (`select_gpus`, Triton's rules and wording)."""

from __future__ import annotations

import json

import pytest

from pytriton.config import gpus
from pytriton.config.gpus import GpuDevice, GpuSelectionError, apply_cuda_visible_devices, select_gpus
from tests._fake_nvml import fake_gpus, install_fake_pynvml

A = GpuDevice(0, "GPU-aaaa1111-0000", "A", "0000:01:00.0")
B = GpuDevice(1, "GPU-bbbb2222-0000", "B", "0000:02:00.0")
C = GpuDevice(2, "GPU-bbbb3333-0000", "C", "0000:03:00.0")


def information(model: str, uuid: str, bus: str) -> str:
    return (f"Model: \t\t {model}\nIRQ:   \t\t 42\nGPU UUID: \t {uuid}\nVideo BIOS: \t 96.00.89.00.01\n"
            f"Bus Type: \t PCIe\nDMA Size: \t 47 bits\nBus Location: \t {bus}\nDevice Minor: \t 0\n")


def test_driver_files_list_the_gpus_in_pci_order(tmp_path):
    for bus, model, uuid in (("0000:3b:00.0", "NVIDIA A100", "GPU-second"), ("0000:07:00.0", "NVIDIA L4", "GPU-first"),
                             ("0000:c1:00.0", "NVIDIA T4", "??")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(information(model, uuid, bus))
    (tmp_path / "not-a-gpu").mkdir()  # no information file: ignored
    devices = gpus.driver_file_devices(tmp_path)
    assert devices == [GpuDevice(0, "GPU-first", "NVIDIA L4", "0000:07:00.0"),
                       GpuDevice(1, "GPU-second", "NVIDIA A100", "0000:3b:00.0"),
                       GpuDevice(2, "", "NVIDIA T4", "0000:c1:00.0")]
    assert [d.cuda_visible_devices for d in devices] == ["GPU-first", "GPU-second", "2"]  # no UUID: the index


def test_no_driver_directory_is_no_gpu(tmp_path):
    assert gpus.driver_file_devices(tmp_path / "absent") == []


@pytest.fixture
def fake_nvml(monkeypatch):
    yield install_fake_pynvml(monkeypatch)
    gpus.physical_gpus.cache_clear()


def test_nvml_devices_are_the_physical_gpus(fake_nvml, monkeypatch, tmp_path):
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", json.dumps(fake_gpus(2)))
    monkeypatch.setattr(gpus, "DRIVER_GPUS_DIR", tmp_path)  # (not consulted when NVML answers)
    found = gpus.physical_gpus()
    assert [(d.index, d.uuid, d.name) for d in found] == [(i, g["uuid"], g["name"]) for i, g in enumerate(fake_gpus(2))]
    assert fake_nvml._initialized == 0  # discovery shut NVML down again


def test_without_nvml_the_driver_files_answer(fake_nvml, monkeypatch, tmp_path):
    monkeypatch.delenv("PYTRITON_FAKE_NVML_DEVICES", raising=False)  # nvmlInit fails: no libnvidia-ml
    (tmp_path / "0000:07:00.0").mkdir()
    (tmp_path / "0000:07:00.0" / "information").write_text(information("NVIDIA L4", "GPU-l4", "0000:07:00.0"))
    monkeypatch.setattr(gpus, "DRIVER_GPUS_DIR", tmp_path)
    assert gpus.physical_gpus() == (GpuDevice(0, "GPU-l4", "NVIDIA L4", "0000:07:00.0"),)


def test_no_library_and_no_driver_is_no_gpu_quietly(fake_nvml, monkeypatch, tmp_path, caplog):
    monkeypatch.delenv("PYTRITON_FAKE_NVML_DEVICES", raising=False)
    monkeypatch.setattr(gpus, "DRIVER_GPUS_DIR", tmp_path / "absent")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with caplog.at_level("INFO"):
        assert gpus.visible_gpus() == []
    assert not caplog.records


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, [A, B, C]),  # unset: all
        ("", []),  # empty: none
        ("2,0", [C, A]),  # order is CUDA_VISIBLE_DEVICES's
        ("1", [B]),
        (" 1 , 2", [B, C]),
        ("0,5,1", [A]),  # an index that does not exist hides the rest
        ("0,,1", [A]),  # so does an empty entry
        ("0,-1,1", [A]),  # and a negative one
        ("1,1,2", [B]),  # and a repeated one
        ("GPU-aaaa1111-0000,1", [A, B]),  # UUIDs
        ("GPU-bbbb3,GPU-AAAA", [C, A]),  # unique prefixes of UUIDs, any case
        ("GPU-bbbb,0", []),  # an ambiguous prefix names no device
        ("nonsense,0", []),
    ],
)
def test_cuda_visible_devices_as_cuda_reads_it(value, expected):
    assert apply_cuda_visible_devices([A, B, C], value) == expected


def test_visible_gpus_follow_the_environment(fake_nvml, monkeypatch):
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", json.dumps(fake_gpus(3)))
    uuids = [g["uuid"] for g in fake_gpus(3)]
    assert [d.uuid for d in gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,0"})] == [uuids[2], uuids[0]]
    # visible id 0 is physical GPU 2: a worker pinned to it is told that device, by UUID
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,0"})[0].cuda_visible_devices == uuids[2]


def test_select_given_ids():
    assert select_gpus("m", None, [1, 0], [A, B]) == [1, 0]
    assert select_gpus("m", "cpu", [0], [A, B]) == [0]  # the command line overrides a declaration


@pytest.mark.parametrize(
    "requested, available, message",
    [
        ([0, 1], [], "instance group m_0 of model m specifies invalid or unsupported gpu id 0. Visible GPUs: none "
                     "(no NVIDIA GPU was found"),
        ([5], [A, B], "instance group m_5 of model m specifies invalid or unsupported gpu id 5. Visible GPUs: "
                      "0 (A, GPU-aaaa1111-0000), 1 (B, GPU-bbbb2222-0000)"),
        ([-1], [A], "specifies invalid or unsupported gpu id -1. Visible GPUs: 0 (A, GPU-aaaa1111-0000)"),
        ([0, 0], [A, B], "instance group m_0 of model m repeats gpu id 0. Visible GPUs: 0 (A,"),
    ],
)
def test_select_refuses_ids_that_cannot_be_used(requested, available, message):
    with pytest.raises(GpuSelectionError) as raised:
        select_gpus("m", None, requested, available)
    assert message in str(raised.value)


def test_defaults_without_ids():
    assert select_gpus("m", "gpu", None, [A, B, C]) == [0, 1, 2]  # Triton's default: instances on each GPU
    assert select_gpus("m", "auto", None, [A, B]) == [0, 1]
    assert select_gpus("m", "auto", None, []) == []  # auto on a machine without GPU: CPU instances
    assert select_gpus("m", None, None, [A, B]) == []  # not declared for GPU: CPU instances, as before
    assert select_gpus("m", "cpu", None, [A, B]) == []
    assert select_gpus("m", None, None, [A, B], all_requested=True) == [0, 1]  # --gpus all


@pytest.mark.parametrize("kind, all_requested", [("gpu", False), (None, True)])
def test_gpu_needed_and_none_visible(kind, all_requested):
    with pytest.raises(GpuSelectionError) as raised:
        select_gpus("m", kind, None, [], all_requested=all_requested)
    assert "instance group m_gpus of model m has kind KIND_GPU but no GPUs are available" in str(raised.value)


def test_parse_gpu_ids():
    assert gpus.parse_gpu_ids("0, 1") == [0, 1]
    with pytest.raises(GpuSelectionError, match="comma-separated integers"):
        gpus.parse_gpu_ids("0,one")
