"""NVIDIA PyTriton's side of the CPU-bound rows: ``sched_models.spin`` bound with N instances.

    python serve_spin.py --http-port P --grpc-port Q --metrics-port R --instances N

PyTriton's way to several instances is a list of callables: N threads of this one process, sharing its GIL.
(Ours serves the same callable with ``pytriton serve sched_models.py:spin --instances N``: N worker processes.)
No dynamic batcher: each request is executed on its own, by whichever instance is free.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sched_models import spin  # noqa: E402

from pytriton.model_config import ModelConfig, Tensor  # noqa: E402
from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig  # noqa: E402


def _raise_interrupt(*_):
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    parser.add_argument("--instances", type=int, default=1)
    args = parser.parse_args()
    signal.signal(signal.SIGINT, _raise_interrupt)
    signal.signal(signal.SIGTERM, _raise_interrupt)

    import pytriton

    print(f"BENCH pytriton package: {os.path.dirname(pytriton.__file__)}", flush=True)
    config = TritonConfig(http_port=args.http_port, grpc_port=args.grpc_port, metrics_port=args.metrics_port)
    security = TritonSecurityConfig(restricted_endpoints=[])  # perf_analyzer reads statistics without a token
    with Triton(config=config, security_config=security) as triton:
        triton.bind(model_name="spin", infer_func=[spin] * args.instances,
                    inputs=[Tensor(name="INPUT", dtype=np.float32, shape=(16,))],
                    outputs=[Tensor(name="OUTPUT", dtype=np.float32, shape=(16,))],
                    config=ModelConfig(batching=True, max_batch_size=8, batcher=None))
        triton.serve()


if __name__ == "__main__":
    main()
