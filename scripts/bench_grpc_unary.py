#!/usr/bin/env python3
"""Small unary gRPC calls through tritonclient.grpc: calls/s of this checkout's server, optionally paired with a
second source tree (e.g. main exported with `git archive`), run alternately so both see the same machine load.

Each run starts `pytriton serve tests.models:identity` (`--floats` FP32 in, the same out), warms up, then makes
`--calls` ModelInfer calls with `--concurrency` threads (one InferenceServerClient each) and reports calls/s.
Usage: scripts/bench_grpc_unary.py [--calls 3000] [--concurrency 1 8] [--repeats 3] [--floats 16] [--base TREE]
(a base tree: `mkdir /tmp/main-tree && git archive main pytriton tests | tar -x -C /tmp/main-tree`)
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

REPO = Path(__file__).resolve().parent.parent
ARGS = ["--max-batch-size", "0", "--input", "IN_FP32:fp32:-1", "--output", "OUT_FP32:fp32:-1"]
PORT = re.compile(r"Started GRPCInferenceService at [^:]+:(\d+)")


def start(tree: Path | None) -> tuple[subprocess.Popen, int]:
    # PYTHONSAFEPATH: `-m` does not put the working directory first, so PYTHONPATH decides which pytriton runs
    env = dict(os.environ, PYTRITON_EXIT_WITH_PARENT="1", PYTHONSAFEPATH="1")
    env["PYTHONPATH"] = f"{tree}:{REPO}" if tree is not None else str(REPO)
    cmd = [sys.executable, "-m", "pytriton.cli", "serve", "tests.models:identity", *ARGS, "--grpc-port", "0",
           "--grpc-address", "127.0.0.1", "--no-allow-http", "--no-allow-metrics"]
    process = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = 0
    for line in process.stdout:  # type: ignore[union-attr]
        match = PORT.search(line)
        if match:
            port = int(match.group(1))
        if "pytriton server ready" in line:
            break
    threading.Thread(target=lambda: process.stdout.read(), daemon=True).start()  # type: ignore[union-attr]
    if not port:
        process.kill()
        raise RuntimeError("the server did not start")
    return process, port


def run(port: int, calls: int, concurrency: int, floats: int) -> float:
    x = grpcclient.InferInput("IN_FP32", [floats], "FP32")
    x.set_data_from_numpy(np.arange(floats, dtype=np.float32))
    clients = [grpcclient.InferenceServerClient(f"127.0.0.1:{port}") for _ in range(concurrency)]
    for client in clients:
        for _ in range(50):
            client.infer("identity", [x])
    per = calls // concurrency

    def loop(client: grpcclient.InferenceServerClient) -> None:
        for _ in range(per):
            client.infer("identity", [x])

    threads = [threading.Thread(target=loop, args=(c,)) for c in clients]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    for client in clients:
        client.close()
    return per * concurrency / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--floats", type=int, default=16, help="tensor size (16 floats; 262144 = 1 MiB)")
    parser.add_argument("--base", type=Path, help="a source tree to compare with (its pytriton/ is imported)")
    options = parser.parse_args()
    trees: dict[str, Path | None] = {"this": None}
    if options.base is not None:
        trees = {"base": options.base, "this": None}
    results: dict[tuple[str, int], list[float]] = {}
    for _ in range(options.repeats):
        for name, tree in trees.items():
            process, port = start(tree)
            try:
                for concurrency in options.concurrency:
                    rate = run(port, options.calls, concurrency, options.floats)
                    results.setdefault((name, concurrency), []).append(rate)
                    print(f"{name:5} c={concurrency:<3} {rate:8.0f} calls/s", flush=True)
            finally:
                process.terminate()
                process.wait(30)
    print("\nmedians (calls/s):")
    for concurrency in options.concurrency:
        line = f"c={concurrency:<3}"
        for name in trees:
            line += f"  {name} {statistics.median(results[(name, concurrency)]):8.0f}"
        if options.base is not None:
            this, base = (statistics.median(results[(name, concurrency)]) for name in ("this", "base"))
            ratio = this / base
            line += f"  this/base {ratio:.3f}"
        print(line)


if __name__ == "__main__":
    main()
