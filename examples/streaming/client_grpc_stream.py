"""Print the tokens of "TokenGenerator" as they stream, with NVIDIA's `tritonclient.grpc` bidirectional stream (run
examples/streaming/server.py first).

    python examples/streaming/client_grpc_stream.py --url localhost:8001 --prompt "pytriton" --max-tokens 12

With `enable_empty_final_response=True` the server ends each request's stream with an empty response whose
`triton_final_response` parameter is true, so the client knows when a request is done.
"""

from __future__ import annotations

import argparse
import queue

import numpy as np
import tritonclient.grpc as grpcclient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="localhost:8001", help="HOST:PORT of the gRPC endpoint")
    parser.add_argument("--prompt", default="Streaming with pytriton")
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(args.url)
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        prompt = grpcclient.InferInput("prompt", [1], "BYTES")
        prompt.set_data_from_numpy(np.array([args.prompt.encode()], dtype=object))
        max_tokens = grpcclient.InferInput("max_tokens", [1], "INT32")
        max_tokens.set_data_from_numpy(np.array([args.max_tokens], dtype=np.int32))
        client.async_stream_infer("TokenGenerator", [prompt, max_tokens], request_id="1",
                                  enable_empty_final_response=True)
        count = 0
        while True:
            result, error = responses.get(timeout=60)
            if error is not None:
                raise SystemExit(f"error: {error}")
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
            print(result.as_numpy("token")[0].decode(), end=" ", flush=True)
            count += 1
        print(f"\n{count} tokens")
    finally:
        client.stop_stream()
        client.close()


if __name__ == "__main__":
    main()
