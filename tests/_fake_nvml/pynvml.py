"""A stand-in for nvidia-ml-py's `pynvml` whose GPUs come from PYTRITON_FAKE_NVML_DEVICES (tests without a GPU).

The variable holds a JSON list of {"uuid", "name", "memory_total", "memory_used", "utilization" (percent),
"power_mw", "power_limit_mw", "energy_mj"}; unset, NVML behaves as on a machine without the NVIDIA driver
(`nvmlInit` fails), so that what the server does with the answers is the real code's, only the devices are not.
"""

from __future__ import annotations

import json
import os
import types
from typing import Any

ENV = "PYTRITON_FAKE_NVML_DEVICES"


class NVMLError(Exception):
    """As pynvml's base error."""


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801 - pynvml's name
    pass


class NVMLError_Uninitialized(NVMLError):  # noqa: N801
    pass


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801
    pass


_initialized = 0


def _devices() -> list[dict[str, Any]]:
    if not _initialized:
        raise NVMLError_Uninitialized("Uninitialized")
    return json.loads(os.environ[ENV])


def nvmlInit() -> None:
    global _initialized
    if ENV not in os.environ:
        raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
    _initialized += 1


def nvmlShutdown() -> None:
    global _initialized
    if not _initialized:
        raise NVMLError_Uninitialized("Uninitialized")
    _initialized -= 1


def nvmlDeviceGetCount() -> int:
    return len(_devices())


def nvmlDeviceGetHandleByIndex(index: int) -> dict[str, Any]:
    devices = _devices()
    if not 0 <= index < len(devices):
        raise NVMLError_InvalidArgument("Invalid Argument")
    return devices[index]


def _field(handle: dict[str, Any], key: str) -> Any:
    if key not in handle:
        raise NVMLError_NotSupported("Not Supported")
    return handle[key]


def nvmlDeviceGetUUID(handle: dict[str, Any]) -> str:
    return handle["uuid"]


def nvmlDeviceGetName(handle: dict[str, Any]) -> str:
    return handle.get("name", "Fake GPU")


def nvmlDeviceGetPciInfo(handle: dict[str, Any]) -> types.SimpleNamespace:
    return types.SimpleNamespace(busId=handle.get("pci_bus_id", ""))


def nvmlDeviceGetMemoryInfo(handle: dict[str, Any]) -> types.SimpleNamespace:
    total = _field(handle, "memory_total")
    used = _field(handle, "memory_used")
    return types.SimpleNamespace(total=total, used=used, free=total - used)


def nvmlDeviceGetUtilizationRates(handle: dict[str, Any]) -> types.SimpleNamespace:
    return types.SimpleNamespace(gpu=_field(handle, "utilization"), memory=0)


def nvmlDeviceGetPowerUsage(handle: dict[str, Any]) -> int:
    return _field(handle, "power_mw")


def nvmlDeviceGetPowerManagementLimit(handle: dict[str, Any]) -> int:
    return _field(handle, "power_limit_mw")


def nvmlDeviceGetTotalEnergyConsumption(handle: dict[str, Any]) -> int:
    """Grows by 1000 mJ at each call, as a GPU that keeps drawing power (from `energy_mj`)."""
    handle["energy_mj"] = _field(handle, "energy_mj") + 1000
    return handle["energy_mj"]
