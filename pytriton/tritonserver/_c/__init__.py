"""`tritonserver._c`, as NVIDIA's package has it: everything of `triton_bindings`, re-exported."""

from pytriton.tritonserver._c import triton_bindings
from pytriton.tritonserver._c.triton_bindings import *  # noqa: F403
from pytriton.tritonserver._c.triton_bindings import __all__ as _bindings_all

__all__ = ["triton_bindings", *_bindings_all]
