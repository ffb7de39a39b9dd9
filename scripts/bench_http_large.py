#!/usr/bin/env python3
"""Throughput of large binary HTTP infer requests with tritonclient.http, for before/after comparisons.

Starts `pytriton serve examples.add_sub:double` (FP32, variable length, 1 instance) from the pytriton found first
in --tree (default: this repository; an extracted older tree can be compared with it), then runs each case for --seconds:
`SIZE_MIB x CONCURRENCY` threads, each with its own client, sending one FP32 tensor of SIZE_MIB as binary data and
checking the answer (2x). Prints requests/s and MiB/s per case.

    scripts/bench_http_large.py --cases 16x2 1x8 --seconds 10
    scripts/bench_http_large.py --tree /tmp/old-tree ...   # the same against `git archive REV pytriton examples`
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

MiB = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(tree: str, extra: list[str]) -> tuple[subprocess.Popen, str]:
    ports = {name: _free_port() for name in ("grpc", "http", "metrics")}
    cmd = [sys.executable, "-m", "pytriton.cli", "serve", "examples.add_sub:double", "--input", "INPUT:fp32:-1",
           "--output", "OUTPUT:fp32:-1", "--max-batch-size", "0", *extra]
    for name, port in ports.items():
        cmd += [f"--{name}-port", str(port), f"--{name}-address", "127.0.0.1"]
    process = subprocess.Popen(cmd, cwd=tree, env=dict(os.environ, PYTRITON_EXIT_WITH_PARENT="1", PYTHONPATH=tree),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"127.0.0.1:{ports['http']}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # OSError, InferenceServerException: not listening yet
        with contextlib.suppress(OSError, InferenceServerException), httpclient.InferenceServerClient(url) as client:
            if client.is_server_ready():
                return process, url
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("server did not become ready")


def _case(url: str, size_mib: float, concurrency: int, seconds: float) -> float:
    data = np.arange(int(size_mib * MiB) // 4, dtype=np.float32)
    expected = data * 2
    counts = [0] * concurrency
    stop = time.monotonic() + seconds

    def client_loop(index: int) -> None:
        with httpclient.InferenceServerClient(url, network_timeout=120, connection_timeout=120) as client:
            tensor = httpclient.InferInput("INPUT", list(data.shape), "FP32")
            tensor.set_data_from_numpy(data, binary_data=True)
            output = httpclient.InferRequestedOutput("OUTPUT", binary_data=True)
            client.infer("double", [tensor], outputs=[output])  # warm
            while time.monotonic() < stop:
                result = client.infer("double", [tensor], outputs=[output])
                assert np.array_equal(result.as_numpy("OUTPUT"), expected)
                counts[index] += 1

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(concurrency)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=["16x2", "1x8"], help="SIZE_MIBxCONCURRENCY")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="directory holding the pytriton (and examples) packages the server runs")
    parser.add_argument("--server-arg", action="append", default=[], help="extra `pytriton serve` argument")
    args = parser.parse_args()
    process, url = _start(args.tree, args.server_arg)
    try:
        for case in args.cases:
            size, concurrency = case.split("x")
            rate = _case(url, float(size), int(concurrency), args.seconds)
            print(f"{case}: {rate:.1f} req/s, {rate * float(size):.1f} MiB/s", flush=True)
    finally:
        process.terminate()
        process.wait(30)


if __name__ == "__main__":
    main()
