"""`tritonserver._api`, laid out as NVIDIA's package: each submodule re-exports the objects of this package under
the names NVIDIA's module of the same name binds (one set of classes; see docs/guide/in-process.md)."""

from pytriton.tritonserver._api import (
    _allocators,
    _datautils,
    _dlpack,
    _logging,
    _memorybuffer,
    _model,
    _request,
    _response,
    _server,
    _tensor,
)

__all__ = ["_allocators", "_datautils", "_dlpack", "_logging", "_memorybuffer", "_model", "_request", "_response",
           "_server", "_tensor"]  # fmt: skip
