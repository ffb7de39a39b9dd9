"""Print the tokens of "TokenGenerator" as they stream, with PyTriton's `DecoupledModelClient` (gRPC only; run
examples/streaming/server.py first).

    python examples/streaming/client_decoupled.py --url grpc://localhost:8001 --prompt "pytriton" --max-tokens 12
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pytriton.client import DecoupledModelClient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="grpc://localhost:8001", help="grpc://HOST:PORT")
    parser.add_argument("--prompt", default="Streaming with pytriton")
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()
    with DecoupledModelClient(args.url, "TokenGenerator", init_timeout_s=30) as client:
        start = time.monotonic()
        count = 0
        # infer_sample returns an iterator: each item is one response, available as soon as the server sends it.
        for response in client.infer_sample(prompt=np.array([args.prompt.encode()], dtype=object),
                                            max_tokens=np.array([args.max_tokens], dtype=np.int32)):
            print(response["token"][0].decode(), end=" ", flush=True)
            count += 1
        print(f"\n{count} tokens in {time.monotonic() - start:.2f} s")


if __name__ == "__main__":
    main()
