"""pytriton: a Triton-compatible inference server written in Python."""

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "client", "model_config", "triton"]


def __getattr__(name: str) -> Any:
    # As PyTriton's package, `pytriton.client`, `.model_config` and `.triton` are reachable from `pytriton`;
    # imported on first use so that workers and the CLI do not pay for them.
    if name in ("client", "model_config", "triton"):
        import importlib

        return importlib.import_module(f"pytriton.{name}")
    raise AttributeError(name)
