"""Triton's in-process Python API, as NVIDIA's containers name it: the objects of `pytriton.tritonserver`."""

from pytriton.tritonserver import *  # noqa: F403
from pytriton.tritonserver import __all__, __doc__  # noqa: F401
