"""Every service on a free port of 127.0.0.1 (loopback only), for `TritonConfig` and for the `pytriton serve` CLI."""

from __future__ import annotations

FREE_PORTS = dict(http_port=0, grpc_port=0, metrics_port=0, http_address="127.0.0.1", grpc_address="127.0.0.1",
                  metrics_address="127.0.0.1")
"""`TritonConfig(**FREE_PORTS)`: the in-process API's servers on ports the kernel picks."""

LOCAL_PORTS = [arg for service in ("grpc", "http", "metrics")
               for arg in (f"--{service}-port", "0", f"--{service}-address", "127.0.0.1")]
"""The same as `pytriton serve` options."""
