"""The benchmark model: y = 2x (FP32), served through the PyTriton API.

The same file runs under both packages that import as ``pytriton`` (this repository's and NVIDIA
PyTriton 0.7), each from its own virtual environment, so both servers get exactly the same user code:

    python serve_double.py --http-port P --grpc-port Q --metrics-port R [--batching off|dynamic]

Models (both ``max_batch_size=64``, one instance, callable decorated with ``@batch``):

* ``double_small``: INPUT/OUTPUT fp32[16]       (64 B per request)
* ``double_1mib``:  INPUT/OUTPUT fp32[262144]   (1 MiB per request)

``--batching off`` binds them with ``ModelConfig(batching=True, max_batch_size=64, batcher=None)``:
batch-1 requests are accepted (the batch dimension exists) but no dynamic batcher is configured in either
server, so every request is executed on its own. ``--batching dynamic`` keeps the PyTriton default
``DynamicBatcher()`` (max_queue_delay_microseconds=0) so queued requests are executed together.

Shared memory registration must work without a token for perf_analyzer (``--shared-memory system``):
both servers restrict the shared-memory API behind an access token by default, hence
``TritonSecurityConfig(restricted_endpoints=[])``.

SIGINT or SIGTERM stops the server (NVIDIA's ``serve()`` reacts only to KeyboardInterrupt).
"""

from __future__ import annotations

import argparse
import os
import signal

import numpy as np

from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig

MODELS = {"double_small": 16, "double_1mib": 262144}


@batch
def double(INPUT):
    return {"OUTPUT": INPUT * np.float32(2)}


def _raise_interrupt(*_):
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    parser.add_argument("--batching", choices=("off", "dynamic"), default="off")
    parser.add_argument("--max-queue-delay-us", type=int, default=0)
    parser.add_argument("--grpc-server-cert", help="serve gRPC over TLS with this certificate (PEM) ...")
    parser.add_argument("--grpc-server-key", help="... and this key")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    args = parser.parse_args()

    # A launcher without job control starts us with SIGINT ignored: restore both signals explicitly.
    signal.signal(signal.SIGINT, _raise_interrupt)
    signal.signal(signal.SIGTERM, _raise_interrupt)

    import pytriton

    # The bench checks that each venv imported the package it should have (both import as `pytriton`).
    print(f"BENCH pytriton package: {os.path.dirname(pytriton.__file__)}", flush=True)
    tls = {}
    if args.grpc_server_cert:  # gRPC over TLS (bench_lib/tls_bench.py)
        tls = dict(grpc_use_ssl=True, grpc_server_cert=args.grpc_server_cert, grpc_server_key=args.grpc_server_key)
    config = TritonConfig(http_port=args.http_port, grpc_port=args.grpc_port, metrics_port=args.metrics_port, **tls)
    security = TritonSecurityConfig(restricted_endpoints=[])
    with Triton(config=config, security_config=security) as triton:
        for name in args.models.split(","):
            n = MODELS[name]
            if args.batching == "off":
                model_config = ModelConfig(batching=True, max_batch_size=64, batcher=None)
            else:
                model_config = ModelConfig(
                    batching=True,
                    max_batch_size=64,
                    batcher=DynamicBatcher(max_queue_delay_microseconds=args.max_queue_delay_us),
                )
            triton.bind(
                model_name=name,
                infer_func=double,
                inputs=[Tensor(name="INPUT", dtype=np.float32, shape=(n,))],
                outputs=[Tensor(name="OUTPUT", dtype=np.float32, shape=(n,))],
                config=model_config,
            )
        triton.serve()


if __name__ == "__main__":
    main()
