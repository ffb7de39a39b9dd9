"""Call "Linear" with PyTriton's `ModelClient` (run examples/linear/server.py first).

    python examples/linear/client_model_client.py                        # HTTP, localhost:8000
    python examples/linear/client_model_client.py --url grpc://localhost:8001

`infer_sample` sends one sample (the client adds the batch axis and removes it from the result); `infer_batch`
sends a batch whose first axis is the batch dimension.
"""

from __future__ import annotations

import argparse

import numpy as np

from pytriton.client import ModelClient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="localhost:8000", help="http://HOST:PORT (the default) or grpc://HOST:PORT")
    args = parser.parse_args()
    # init_timeout_s: how long to wait for the server and the model to be ready.
    with ModelClient(args.url, "Linear", init_timeout_s=30) as client:
        sample = np.array([1.0, 2.0, 3.0], dtype=np.float32)
        print("sample:", client.infer_sample(data=sample)["result"])
        batch = np.arange(6, dtype=np.float32).reshape(2, 3)
        print("batch:", client.infer_batch(data=batch)["result"].tolist())


if __name__ == "__main__":
    main()
