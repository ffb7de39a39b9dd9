"""pytriton: a Triton-compatible inference server written in Python."""

__version__ = "0.1.0"

__all__ = ["__version__"]
