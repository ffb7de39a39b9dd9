"""Large-tensor probe: 16 MiB identity requests over gRPC and HTTP (binary), c clients, no shm.

Prints inferences/s, tensor GiB/s each way and the server's CPU µs per request (utime+stime of the server
process tree from /proc, over the timed requests). A measurement aid for docs/profile.md ("Copies per byte").

    .venv/bin/python scripts/large_probe.py [--mib 16] [--requests 40] [--concurrency 2] [--protocols grpc,http]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_lib import procfs  # noqa: E402

from tests.conftest import serve, tensor_args  # noqa: E402


def cpu_s(pid: int) -> tuple[float, float]:
    """(the server process's CPU seconds, its workers')."""
    return procfs.cpu_seconds([pid]), procfs.cpu_seconds(procfs.descendants(pid))


def _client(protocol: str, url: str, mib: int, count: int, ready, go) -> None:
    """One client process: `count` inferences after `go` is set (gevent's HTTP client wants its own process)."""
    if protocol == "grpc":
        import tritonclient.grpc as client_mod
        client = client_mod.InferenceServerClient(url)
    else:
        import tritonclient.http as client_mod
        client = client_mod.InferenceServerClient(url, connection_timeout=120, network_timeout=120)
    data = np.random.default_rng(0).random(mib * (1 << 18), dtype=np.float32)
    tensor = client_mod.InferInput("IN_X", list(data.shape), "FP32")
    if protocol == "grpc":
        tensor.set_data_from_numpy(data)
        outputs = [client_mod.InferRequestedOutput("OUT_X")]
    else:
        tensor.set_data_from_numpy(data, binary_data=True)
        outputs = [client_mod.InferRequestedOutput("OUT_X", binary_data=True)]

    def one() -> None:
        got = client.infer("identity", [tensor], outputs=outputs).as_numpy("OUT_X")
        if not np.array_equal(got, data):
            raise AssertionError("the response differs from the request")

    one()  # warm up (and check the bytes)
    ready.set()
    go.wait()
    for _ in range(count):
        client.infer("identity", [tensor], outputs=outputs)
    client.close()


def run(protocol: str, url: str, mib: int, requests: int, concurrency: int, server_pid: int) -> None:
    ctx = multiprocessing.get_context("spawn")
    per = requests // concurrency
    go = ctx.Event()
    readies = [ctx.Event() for _ in range(concurrency)]
    procs = [ctx.Process(target=_client, args=(protocol, url, mib, per, r, go)) for r in readies]
    for p in procs:
        p.start()
    for r in readies:
        if not r.wait(120):
            raise RuntimeError("a client did not start")
    cpu0 = cpu_s(server_pid)
    start = time.perf_counter()
    print(f"timing {protocol} (server pid {server_pid})", flush=True)
    go.set()
    for p in procs:
        p.join()
    wall = time.perf_counter() - start
    cpu1 = cpu_s(server_pid)
    server, workers = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    n = per * concurrency
    gib = (mib << 20) * n / wall / (1 << 30)
    print(f"{protocol:5s} {mib} MiB c={concurrency}: {n / wall:6.1f} infer/s  {gib:5.2f} GiB/s each way  "
          f"server CPU {server / n * 1e6:6.0f} us/request, worker {workers / n * 1e6:5.0f}  "
          f"(load {os.getloadavg()[0]:.1f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--protocols", default="grpc,http")
    args = parser.parse_args()
    with serve("tests.models:identity", "--max-batch-size", "0",
               *tensor_args("input", [("IN_X", "fp32", "-1")]),
               *tensor_args("output", [("OUT_X", "fp32", "-1")])) as server:
        for protocol in args.protocols.split(","):
            url = server.grpc_url if protocol == "grpc" else server.http_url
            run(protocol, url, args.mib, args.requests, args.concurrency, server.process.pid)


if __name__ == "__main__":
    main()
