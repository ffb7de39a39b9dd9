"""Building a PythonModelBackend from a model.py source, without a worker process (tests/backends)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pytriton.backends.python_model import PythonModelBackend, python_model_target
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.types import Request


def config(name: str, decoupled: bool = False) -> TritonModelConfig:
    """A model X (FP32, [-1]) -> Y, Z (FP32, [-1])."""
    return TritonModelConfig(model_name=name, inputs=[TensorSpec("X", "FP32", (-1,))],
                             outputs=[TensorSpec("Y", "FP32", (-1,)), TensorSpec("Z", "FP32", (-1,))],
                             decoupled=decoupled)


def backend_for(tmp_path: Path, name: str, source: str, decoupled: bool = False) -> PythonModelBackend:
    """The backend of `source` as `<tmp_path>/<name>/3/model.py`."""
    version_dir = tmp_path / name / "3"
    version_dir.mkdir(parents=True)
    (version_dir / "model.py").write_text(source)
    return PythonModelBackend(python_model_target(str(version_dir / "model.py")), config(name, decoupled))


def request(mode: str = "ok", requested: list[str] | None = None) -> Request:
    """A request X = [1, 2] with the parameter `mode`."""
    return Request({"X": np.array([1.0, 2.0], dtype=np.float32)}, {"mode": mode}, None, requested)
