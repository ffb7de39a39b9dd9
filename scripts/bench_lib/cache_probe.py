"""Response-cache hits vs misses, against a running server (our venv: tritonclient gRPC), printed as JSON.

    python cache_probe.py --url 127.0.0.1:PORT --model M --requests N

One request at a time, alternating a hit (the same 16 floats every time, cached after the first) and a miss (16
floats never sent before: a counter in the first element), so that both kinds see the same machine load. Each
latency is the client's round trip. The server's cache statistics of the model are read before and after, to
check that the hits were hits and the misses misses.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import tritonclient.grpc as grpcclient


def _stats(client: grpcclient.InferenceServerClient, model: str) -> dict[str, int]:
    s = client.get_inference_statistics(model, as_json=True)["model_stats"][0]["inference_stats"]
    return {k: int(s.get(k, {}).get("count", 0)) for k in ("cache_hit", "cache_miss", "success")}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--url", required=True)
    p.add_argument("--model", default="double_cached")
    p.add_argument("--requests", type=int, default=500, help="of each kind (default 500)")
    p.add_argument("--warmup", type=int, default=20)
    args = p.parse_args(argv)
    client = grpcclient.InferenceServerClient(args.url)
    same = np.ones((1, 16), np.float32)
    counter = [0.0]

    def infer(data: np.ndarray) -> float:
        inp = grpcclient.InferInput("INPUT", list(data.shape), "FP32")
        inp.set_data_from_numpy(data)
        t0 = time.perf_counter()
        client.infer(args.model, [inp])
        return (time.perf_counter() - t0) * 1e6

    def fresh() -> np.ndarray:
        counter[0] += 1
        d = np.zeros((1, 16), np.float32)
        d[0, 0] = counter[0]
        return d

    for _ in range(args.warmup):
        infer(same)
        infer(fresh())
    before = _stats(client, args.model)
    hits: list[float] = []
    misses: list[float] = []
    for _ in range(args.requests):
        hits.append(infer(same))
        misses.append(infer(fresh()))
    after = _stats(client, args.model)
    delta = {k: after[k] - before[k] for k in after}
    out = {
        "hit": {"n": len(hits), "p50_us": statistics.median(hits), "p99_us": pct(hits, 0.99)},
        "miss": {"n": len(misses), "p50_us": statistics.median(misses), "p99_us": pct(misses, 0.99)},
        "server": delta,
        "problems": [] if (delta["cache_hit"], delta["cache_miss"]) == (len(hits), len(misses)) else [
            f"server counted {delta['cache_hit']} hits / {delta['cache_miss']} misses, "
            f"expected {len(hits)} / {len(misses)}"],
    }
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
