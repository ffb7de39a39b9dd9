"""Stream a completion from the tiny model with NVIDIA's `tritonclient.grpc` bidirectional stream, the tensors of
vLLM's convention by hand: `text_input`, `sampling_parameters` (a JSON string) -> `text_output`, a piece a response.
Run `pytriton serve examples.llm.model:tiny --openai-port 9000` first.

    python examples/llm/client_grpc_stream.py --url localhost:8001 --prompt "the server"
"""

from __future__ import annotations

import argparse
import json
import queue

import numpy as np
import tritonclient.grpc as grpcclient


def _bytes_input(name: str, value: str) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, [1], "BYTES")
    tensor.set_data_from_numpy(np.array([value.encode()], dtype=object))
    return tensor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="localhost:8001", help="HOST:PORT of the gRPC endpoint")
    parser.add_argument("--prompt", default="the server")
    parser.add_argument("--max-tokens", type=int, default=24)
    args = parser.parse_args()
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(args.url)
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        inputs = [_bytes_input("text_input", args.prompt),
                  _bytes_input("sampling_parameters", json.dumps({"max_tokens": args.max_tokens}))]
        client.async_stream_infer("tiny", inputs, request_id="1", enable_empty_final_response=True)
        print("grpc: ", end="")
        while True:
            result, error = responses.get(timeout=60)
            if error is not None:
                raise SystemExit(f"error: {error}")
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
            print(result.as_numpy("text_output")[0].decode(), end="", flush=True)
        print()
    finally:
        client.stop_stream()
        client.close()


if __name__ == "__main__":
    main()
