"""Call "Linear" from asyncio with PyTriton's `AsyncioModelClient`: many requests in flight at once, which the
server's dynamic batcher may run together (run examples/linear/server.py first).

    python examples/linear/client_asyncio.py --url localhost:8000
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np

from pytriton.client import AsyncioModelClient


async def run(url: str) -> None:
    async with AsyncioModelClient(url, "Linear", init_timeout_s=30) as client:
        samples = [np.full(4, i, dtype=np.float32) for i in range(8)]
        results = await asyncio.gather(*(client.infer_sample(data=s) for s in samples))
        for sample, result in zip(samples, results):
            print(f"{sample[0]:.0f} -> {result['result'].tolist()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="localhost:8000", help="http://HOST:PORT (the default) or grpc://HOST:PORT")
    asyncio.run(run(parser.parse_args().url))


if __name__ == "__main__":
    main()
