"""Serve a torch model on the GPU (examples/torch_cuda_shm/model.py) for clients that use CUDA shared memory.

Needs a GPU, torch and pytriton's `gpu` extra (cupy). The model is given by import path, so it runs in worker
processes of its own, which import it:

    pip install -e '.[gpu]' torch
    python examples/torch_cuda_shm/server.py --access-token SECRET

A `Triton()` server serves the shared-memory endpoints only to clients that send its access token; the token is
`--access-token` (or one generated and printed). The client next to this file passes it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `examples.` importable here and in the workers
from examples.torch_cuda_shm.model import IN_FEATURES, OUT_FEATURES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="127.0.0.1", help="listen address")
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002)
    parser.add_argument("--access-token", default=None, help="the token for the shared-memory endpoints")
    args = parser.parse_args()
    config = TritonConfig(
        http_address=args.address, http_port=args.http_port,
        grpc_address=args.address, grpc_port=args.grpc_port,
        metrics_address=args.address, metrics_port=args.metrics_port,
    )
    with Triton(config=config, security_config=TritonSecurityConfig(access_token=args.access_token)) as triton:
        triton.bind(
            model_name="TorchLinear",
            # An import path: the model runs in a worker process of its own (its own CUDA context).
            infer_func="examples.torch_cuda_shm.model:infer",
            inputs=[Tensor(name="x", dtype=np.float32, shape=(IN_FEATURES,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(OUT_FEATURES,))],
            config=ModelConfig(max_batch_size=64),
        )
        triton.run()
        ports = triton.ports
        if args.access_token is None:
            print(f"access token: {triton.get_access_token()}", flush=True)
        print(f"serving TorchLinear: http={args.address}:{ports['http']} grpc={args.address}:{ports['grpc']} "
              f"metrics={args.address}:{ports['metrics']}", flush=True)
        triton.serve()


if __name__ == "__main__":
    main()
