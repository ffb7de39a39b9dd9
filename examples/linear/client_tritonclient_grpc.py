"""Call "Linear" with NVIDIA's `tritonclient.grpc`, as for any Triton server (run examples/linear/server.py first).

    python examples/linear/client_tritonclient_grpc.py --url localhost:8001
"""

from __future__ import annotations

import argparse

import numpy as np
import tritonclient.grpc as grpcclient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="localhost:8001", help="HOST:PORT of the gRPC endpoint")
    args = parser.parse_args()
    client = grpcclient.InferenceServerClient(args.url)
    try:
        print("server ready:", client.is_server_ready(), "model ready:", client.is_model_ready("Linear"))
        data = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)  # a batch of one row
        tensor = grpcclient.InferInput("data", list(data.shape), "FP32")
        tensor.set_data_from_numpy(data)
        response = client.infer("Linear", [tensor], outputs=[grpcclient.InferRequestedOutput("result")])
        print("result:", response.as_numpy("result").tolist())
    finally:
        client.close()


if __name__ == "__main__":
    main()
