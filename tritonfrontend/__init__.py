"""Triton's in-process network front-ends, as NVIDIA's containers name them: the objects of `pytriton.tritonfrontend`."""

from pytriton.tritonfrontend import *  # noqa: F403
from pytriton.tritonfrontend import __all__, __doc__  # noqa: F401
