"""Call "TorchLinear" with its input and output in CUDA shared memory (tritonclient.utils.cuda_shared_memory): the
request carries no tensor bytes; the model reads the input on the GPU and the server writes the output there.

Needs a GPU and tritonclient's CUDA utilities (`pip install cuda-python`); run examples/torch_cuda_shm/server.py
first, on the same host:

    python examples/torch_cuda_shm/client.py --url localhost:8001 --protocol grpc --access-token SECRET
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.cuda_shared_memory as cudashm

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # for `examples.` when run as a script
from examples.torch_cuda_shm.model import IN_FEATURES, OUT_FEATURES, weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="localhost:8001", help="HOST:PORT of the endpoint of --protocol")
    parser.add_argument("--protocol", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--access-token", required=True, help="the server's access token (shared-memory endpoints)")
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    api = grpcclient if args.protocol == "grpc" else httpclient
    header = "triton-grpc-protocol-triton-access-token" if args.protocol == "grpc" else "triton-access-token"
    headers = {header: args.access_token}
    client = api.InferenceServerClient(args.url)

    x = np.random.default_rng(0).standard_normal((args.batch, IN_FEATURES), dtype=np.float32)
    y_size = args.batch * OUT_FEATURES * 4
    x_region = cudashm.create_shared_memory_region("example_x", x.nbytes, 0)  # on GPU 0
    y_region = cudashm.create_shared_memory_region("example_y", y_size, 0)
    try:
        client.register_cuda_shared_memory("example_x", cudashm.get_raw_handle(x_region), 0, x.nbytes, headers=headers)
        client.register_cuda_shared_memory("example_y", cudashm.get_raw_handle(y_region), 0, y_size, headers=headers)
        cudashm.set_shared_memory_region(x_region, [x])

        tensor = api.InferInput("x", list(x.shape), "FP32")
        tensor.set_shared_memory("example_x", x.nbytes)
        output = api.InferRequestedOutput("y")
        output.set_shared_memory("example_y", y_size)
        client.infer("TorchLinear", [tensor], outputs=[output], headers=headers)  # requests naming regions too

        y = cudashm.get_contents_as_numpy(y_region, np.float32, [args.batch, OUT_FEATURES])
        expected = x @ weights().T
        print("y[0]:", y[0].tolist())
        print("matches numpy:", bool(np.allclose(y, expected, rtol=1e-4, atol=1e-4)))
        client.unregister_cuda_shared_memory(headers=headers)
    finally:
        cudashm.destroy_shared_memory_region(x_region)
        cudashm.destroy_shared_memory_region(y_region)
        client.close()


if __name__ == "__main__":
    main()
