"""A streaming token generator, LLM-style: a decoupled model whose callable is a generator, so each request gets
one response per token, sent as soon as it is yielded (gRPC `ModelStreamInfer`).

    python examples/streaming/server.py                  # HTTP 8000, gRPC 8001, metrics 8002 on 127.0.0.1
    python examples/streaming/server.py --grpc-port 0    # 0 = any free port; the "serving" line says which

The "model" here makes up its tokens (words of the prompt, then a fixed continuation) and sleeps between them, as a
real LLM spends time per token; replace `generate_tokens` with your model's decoding loop.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import numpy as np

from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

CONTINUATION = ["is", "a", "fine", "thing", "to", "stream", "one", "token", "at", "a", "time"]


def generate_tokens(prompt: str, max_tokens: int) -> Iterator[str]:
    """Stands in for an LLM's decoding loop."""
    words = prompt.split() + CONTINUATION
    for i in range(max_tokens):
        yield words[i % len(words)]


def make_generator(token_delay_s: float):
    def generate(requests):
        # The model does not batch (batching=False), so each call holds one request. Each `yield` is the list of
        # responses to the call's requests (here: one); the request's stream ends when the generator returns.
        (request,) = requests
        prompt = request["prompt"][0].decode("utf-8")
        max_tokens = int(request["max_tokens"][0]) if "max_tokens" in request else 16
        for token in generate_tokens(prompt, max_tokens):
            time.sleep(token_delay_s)
            yield [{"token": np.array([token.encode("utf-8")], dtype=object)}]

    return generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="127.0.0.1", help="listen address (0.0.0.0: every interface)")
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002)
    parser.add_argument("--token-delay", type=float, default=0.05, help="seconds per token")
    args = parser.parse_args()
    config = TritonConfig(
        http_address=args.address, http_port=args.http_port,
        grpc_address=args.address, grpc_port=args.grpc_port,
        metrics_address=args.address, metrics_port=args.metrics_port,
    )
    with Triton(config=config) as triton:
        triton.bind(
            model_name="TokenGenerator",
            infer_func=make_generator(args.token_delay),
            inputs=[
                Tensor(name="prompt", dtype=bytes, shape=(1,)),
                Tensor(name="max_tokens", dtype=np.int32, shape=(1,), optional=True),
            ],
            outputs=[Tensor(name="token", dtype=bytes, shape=(1,))],
            # decoupled: any number of responses per request; batching=False: no batch axis on the tensors.
            config=ModelConfig(batching=False, decoupled=True),
        )
        triton.run()
        ports = triton.ports
        print(f"serving TokenGenerator: http={args.address}:{ports['http']} grpc={args.address}:{ports['grpc']} "
              f"metrics={args.address}:{ports['metrics']}", flush=True)
        triton.serve()


if __name__ == "__main__":
    main()
