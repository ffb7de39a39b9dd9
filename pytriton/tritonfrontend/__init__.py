"""Triton's network front-ends for an in-process server (``import tritonfrontend``), over pytriton's.

`KServeHttp`, `KServeGrpc` and `Metrics` take a started `tritonserver.Server` and serve its models over Triton's
HTTP/REST and gRPC protocols and its metrics port, on the server's event loop, while the process goes on calling
`Model.infer` itself. See docs/guide/in-process.md.
"""

from pytriton.tritonfrontend._kserve import KServeGrpc, KServeHttp
from pytriton.tritonfrontend._metrics import Metrics
from pytriton.tritonfrontend._options import OptionsError

__all__ = ["KServeGrpc", "KServeHttp", "Metrics", "OptionsError"]
