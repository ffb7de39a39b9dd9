"""Triton's in-process Python API, as NVIDIA's containers name it: the objects of `pytriton.tritonserver`.

NVIDIA's submodules (`tritonserver._api._server`, `tritonserver._c.triton_bindings`...) are those of
`pytriton.tritonserver`, registered under this package's name so that every NVIDIA path imports the same objects.
"""

import sys as _sys

from pytriton.tritonserver import *  # noqa: F403
from pytriton.tritonserver import (
    __all__,  # noqa: F401
    _api,
    _c,
)

_ALIASED = "pytriton.tritonserver."
for _name, _module in list(_sys.modules.items()):
    if _name.split(".")[:3] in (["pytriton", "tritonserver", "_api"], ["pytriton", "tritonserver", "_c"]):
        _sys.modules[__name__ + "." + _name[len(_ALIASED):]] = _module
del _name, _module
