"""Which GPUs this server may use, found without creating a CUDA context: NVML, else the driver's files.

The ids users pass (`--gpus 0,1`) are the *visible* ones, numbered as CUDA numbers them after
`CUDA_VISIBLE_DEVICES`; `GpuDevice.cuda_visible_devices` names the physical device for a worker's environment.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger("pytriton.core")

DRIVER_GPUS_DIR = Path("/proc/driver/nvidia/gpus")


@dataclasses.dataclass(frozen=True)
class GpuDevice:
    """One GPU: its physical index (NVML's order, by PCI bus id), UUID ("GPU-..."), name and PCI bus id."""

    index: int
    uuid: str
    name: str = ""
    pci_bus_id: str = ""

    @property
    def cuda_visible_devices(self) -> str:
        """What a worker's CUDA_VISIBLE_DEVICES must say to see this device (and only it) as its device 0."""
        return self.uuid or str(self.index)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _nvml_devices() -> list[GpuDevice] | None:
    """The devices NVML reports, or None when NVML cannot be used (no nvidia-ml-py, no libnvidia-ml)."""
    try:
        import pynvml  # noqa: PLC0415 - loaded only when GPUs are looked for
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - pynvml raises NVMLError subclasses, or OSError from ctypes
        logger.debug("NVML is not available: %s", exc)
        return None
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            try:
                pci = _text(pynvml.nvmlDeviceGetPciInfo(handle).busId)
            except Exception:  # noqa: BLE001 - optional detail
                pci = ""
            devices.append(GpuDevice(index, _text(pynvml.nvmlDeviceGetUUID(handle)),
                                     _text(pynvml.nvmlDeviceGetName(handle)), pci))
        return devices
    except Exception as exc:  # noqa: BLE001 - a broken driver is no GPU
        logger.warning("NVML failed to list the GPUs: %s", exc)
        return []
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def driver_file_devices(root: Path | None = None) -> list[GpuDevice]:
    """The devices the NVIDIA driver lists under `root` (default: /proc/driver/nvidia/gpus; one
    `<pci bus id>/information` file each), in PCI bus order as NVML and CUDA_DEVICE_ORDER=PCI_BUS_ID number them."""
    root = DRIVER_GPUS_DIR if root is None else root
    try:
        entries = sorted(p for p in root.iterdir() if (p / "information").is_file())
    except OSError:
        return []
    devices: list[GpuDevice] = []
    for entry in entries:
        fields: dict[str, str] = {}
        try:
            for line in (entry / "information").read_text(errors="replace").splitlines():
                key, sep, value = line.partition(":")
                if sep:
                    fields[key.strip()] = value.strip()
        except OSError:
            continue
        uuid = fields.get("GPU UUID", "")
        if not uuid.upper().startswith(("GPU-", "MIG-")):
            uuid = ""  # "??" in some containers: the index names the device then
        devices.append(GpuDevice(len(devices), uuid, fields.get("Model", ""), fields.get("Bus Location", entry.name)))
    return devices


@functools.lru_cache(maxsize=1)
def physical_gpus() -> tuple[GpuDevice, ...]:
    """All GPUs of the machine (looked up once per process): NVML's answer, else the driver's files, else none."""
    devices = _nvml_devices()
    if devices is None:
        devices = driver_file_devices()
    return tuple(devices)


def _match_entry(entry: str, devices: Sequence[GpuDevice]) -> GpuDevice | None:
    """The device a CUDA_VISIBLE_DEVICES entry names: an index, or a (unique prefix of a) UUID."""
    if entry.isdigit() or (entry[:1] == "+" and entry[1:].isdigit()):
        index = int(entry)
        return devices[index] if index < len(devices) else None
    if entry.upper().startswith("GPU-"):
        found = [d for d in devices if d.uuid.upper().startswith(entry.upper())]
        return found[0] if len(found) == 1 else None
    return None


def apply_cuda_visible_devices(devices: Sequence[GpuDevice], value: str | None) -> list[GpuDevice]:
    """The devices CUDA shows for CUDA_VISIBLE_DEVICES=`value`, in its order (visible id = position).

    Unset: all of them. Otherwise the comma-separated entries, each an index or a UUID (or a unique prefix of
    one); as in CUDA, the first empty, unknown or repeated entry hides itself and every entry after it.
    """
    if value is None:
        return list(devices)
    visible: list[GpuDevice] = []
    for entry in value.split(","):
        device = _match_entry(entry.strip(), devices)
        if device is None or device in visible:
            break
        visible.append(device)
    return visible


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[GpuDevice]:
    """The GPUs this process may use, in the order of the ids users pass (CUDA_VISIBLE_DEVICES applied)."""
    environ = os.environ if environ is None else environ
    return apply_cuda_visible_devices(physical_gpus(), environ.get("CUDA_VISIBLE_DEVICES"))


def describe_gpus(devices: Sequence[GpuDevice]) -> str:
    """'0 (NVIDIA H100, GPU-5e1c...), 1 (...)' or 'none', for messages that name the visible GPUs."""
    if not devices:
        return "none"
    return ", ".join(f"{i} ({d.name or 'GPU'}, {d.uuid or f'physical index {d.index}'})"
                     for i, d in enumerate(devices))


class GpuSelectionError(ValueError):
    """The GPU ids asked for cannot be used here (unknown, repeated or negative ids, or no GPU at all)."""


_GPU_ID = re.compile(r"\s*(-?[0-9]+)\s*")  # ASCII digits only: int() would take "1_0" and "١"


def parse_gpu_ids(text: str) -> list[int]:
    """Comma-separated GPU ids as typed (`--gpus 0,1`); whether they exist is `select_gpus`'s to check."""
    matches = [_GPU_ID.fullmatch(part) for part in text.split(",")]
    if not all(matches):
        raise GpuSelectionError(f"GPU ids are comma-separated integers (or 'all'), got '{text}'")
    return [int(match.group(1)) for match in matches if match]


NO_GPU_REASON = "neither NVML nor /proc/driver/nvidia/gpus lists one, or CUDA_VISIBLE_DEVICES hides them"
NO_GPU_HINT = f"none (no NVIDIA GPU was found: {NO_GPU_REASON})"


def _visible(available: Sequence[GpuDevice]) -> str:
    return describe_gpus(available) if available else NO_GPU_HINT


def select_gpus(
    model_name: str,
    device_kind: str | None,
    requested: list[int] | None,
    available: Sequence[GpuDevice],
    *,
    all_requested: bool = False,
) -> list[int]:
    """The visible GPU ids a model's instances go on (an empty list: CPU instances), as Triton decides them.

    Given ids are checked against the visible GPUs. Without ids, a model declared for GPU goes on every visible
    GPU (Triton's default: its instances on each GPU) and "auto" does so when there is one; an undeclared model
    (None) or one declared "cpu" gets CPU instances.

    Args:
        model_name: named in the messages.
        device_kind: what the model was declared for: "gpu", "cpu", "auto" or None (not declared: CPU).
        requested: the ids given (`--gpus 0,1`), or None when none were given.
        available: the visible GPUs (`visible_gpus()`).
        all_requested: `--gpus all` was given: every visible GPU, and at least one is needed.

    Raises:
        GpuSelectionError: an id that does not exist, is repeated or negative; a GPU needed and none visible.
    """
    if all_requested or (requested is None and device_kind == "gpu"):
        if not available:
            raise GpuSelectionError(f"instance group {model_name}_gpus of model {model_name} has kind KIND_GPU but "
                                    f"no GPUs are available. Visible GPUs: {NO_GPU_HINT}")
        return list(range(len(available)))
    if requested is None:
        return list(range(len(available))) if device_kind == "auto" else []
    if not requested:
        raise GpuSelectionError(f"model {model_name}: no GPU ids given")
    seen: set[int] = set()
    for gpu in requested:
        if gpu < 0 or gpu >= len(available) or gpu in seen:
            problem = "repeats gpu id" if gpu in seen else "specifies invalid or unsupported gpu id"
            raise GpuSelectionError(f"instance group {model_name}_{gpu} of model {model_name} {problem} {gpu}. "
                                    f"Visible GPUs: {_visible(available)}")
        seen.add(gpu)
    return list(requested)


__all__ = [
    "gpu_available",
    "GpuDevice",
    "GpuSelectionError",
    "apply_cuda_visible_devices",
    "describe_gpus",
    "driver_file_devices",
    "parse_gpu_ids",
    "physical_gpus",
    "select_gpus",
    "visible_gpus",
]


def gpu_available() -> bool:
    """A GPU device node exists and cupy (extra "gpu") is installed: CUDA shared memory can work."""
    import glob
    import importlib.util

    return bool(glob.glob("/dev/nvidia[0-9]*")) and importlib.util.find_spec("cupy") is not None
