"""Call "Linear" with NVIDIA's `tritonclient.http` (binary tensors), then read its config and statistics
(run examples/linear/server.py first).

    python examples/linear/client_tritonclient_http.py --url localhost:8000
"""

from __future__ import annotations

import argparse

import numpy as np
import tritonclient.http as httpclient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="localhost:8000", help="HOST:PORT of the HTTP endpoint")
    args = parser.parse_args()
    client = httpclient.InferenceServerClient(args.url)
    try:
        data = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
        tensor = httpclient.InferInput("data", list(data.shape), "FP32")
        tensor.set_data_from_numpy(data, binary_data=True)
        output = httpclient.InferRequestedOutput("result", binary_data=True)
        response = client.infer("Linear", [tensor], outputs=[output])
        print("result:", response.as_numpy("result").tolist())
        config = client.get_model_config("Linear")
        print("max_batch_size:", config["max_batch_size"])
    finally:
        client.close()


if __name__ == "__main__":
    main()
