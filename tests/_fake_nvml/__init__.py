"""Fake GPU discovery for tests without a GPU: `pynvml.py` here stands in for nvidia-ml-py (see its docstring)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from pathlib import Path

FAKE_NVML_DIR = Path(__file__).resolve().parent


def fake_gpus(count: int) -> list[dict]:
    """`count` fake GPUs with distinct UUIDs, memory, utilization and power readings."""
    return [
        {"uuid": f"GPU-{i}aaaaaaa-0000-4000-8000-00000000000{i}", "name": f"Fake GPU {i}",
         "memory_total": (16 + i) * 2**30, "memory_used": (i + 1) * 2**20, "utilization": 10 * (i + 1),
         "power_mw": 50_000 + i, "power_limit_mw": 300_000, "energy_mj": 1_000_000}
        for i in range(count)
    ]


def fake_nvml_env(devices: list[dict] | None, cuda_visible_devices: str | None = None) -> dict[str, str]:
    """Environment for a server subprocess whose `import pynvml` finds the fake reporting `devices` (None: NVML
    unavailable). CUDA_VISIBLE_DEVICES is always set (to every fake GPU unless given): the test machine's own
    setting must not change what the test sees."""
    env = {"PYTHONPATH": os.pathsep.join([str(FAKE_NVML_DIR), *filter(None, [os.environ.get("PYTHONPATH")])])}
    if devices is not None:
        env["PYTRITON_FAKE_NVML_DEVICES"] = json.dumps(devices)
    count = len(devices or [])
    env["CUDA_VISIBLE_DEVICES"] = (",".join(str(i) for i in range(count)) if cuda_visible_devices is None
                                   else cuda_visible_devices)
    return env


def install_fake_pynvml(monkeypatch) -> types.ModuleType:
    """In this process: `import pynvml` gives a fresh fake, and GPU discovery is looked up afresh (undone with
    `monkeypatch`, the caller clears `physical_gpus` again after the test)."""
    from pytriton.config import gpus

    spec = importlib.util.spec_from_file_location("pynvml", FAKE_NVML_DIR / "pynvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    gpus.physical_gpus.cache_clear()
    return module
