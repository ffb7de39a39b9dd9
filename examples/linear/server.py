"""Serve a model with the PyTriton API: `Triton().bind(...)`, then `serve()` until Ctrl-C.

    python examples/linear/server.py                      # HTTP 8000, gRPC 8001, metrics 8002 on 127.0.0.1
    python examples/linear/server.py --http-port 0 ...    # 0 = any free port; the "serving" line says which

The model "Linear" computes result = 2 * data + 1 on batches of float32 vectors (`@batch` hands the callable one
concatenated array per input); the clients next to this file call it.
"""

from __future__ import annotations

import argparse

import numpy as np

from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig


@batch
def linear(data: np.ndarray) -> dict[str, np.ndarray]:
    """One call per batch: `data` has shape (batch, n); so must `result`."""
    return {"result": 2 * data + 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="127.0.0.1", help="listen address (0.0.0.0: every interface)")
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002)
    args = parser.parse_args()
    config = TritonConfig(
        http_address=args.address, http_port=args.http_port,
        grpc_address=args.address, grpc_port=args.grpc_port,
        metrics_address=args.address, metrics_port=args.metrics_port,
    )
    with Triton(config=config) as triton:
        triton.bind(
            model_name="Linear",
            infer_func=linear,
            inputs=[Tensor(name="data", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="result", dtype=np.float32, shape=(-1,))],
            # Requests that arrive within 100 µs of each other run as one batch (up to 64 rows).
            config=ModelConfig(max_batch_size=64, batcher=DynamicBatcher(max_queue_delay_microseconds=100)),
        )
        triton.run()  # returns once the model is ready
        ports = triton.ports
        print(f"serving Linear: http={args.address}:{ports['http']} grpc={args.address}:{ports['grpc']} "
              f"metrics={args.address}:{ports['metrics']}", flush=True)
        triton.serve()  # until Ctrl-C / SIGTERM


if __name__ == "__main__":
    main()
