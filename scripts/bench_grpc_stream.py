#!/usr/bin/env python3
"""Decoupled streaming through tritonclient.grpc: responses/s that a reading client receives from this checkout's
server, optionally paired with a second source tree (e.g. main exported with `git archive`), run alternately so
both see the same machine load.

Each run starts `pytriton serve tests.models:countdown --decoupled`, warms up, then each of `--streams` clients
(one InferenceServerClient and one ModelStreamInfer stream each, in threads) asks for `--responses` responses
(one INT32 each) `--requests` times; reported: the rate of responses received, and the CPU time per response of the
server process and of its worker (less sensitive to a busy machine than the rate).
Usage: scripts/bench_grpc_stream.py [--responses 10000] [--streams 1 4] [--repeats 3] [--base TREE]
(a base tree: `mkdir /tmp/main-tree && git archive main pytriton tests | tar -x -C /tmp/main-tree`)
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
from bench_lib.procfs import cpu_seconds, descendants

REPO = Path(__file__).resolve().parent.parent
SERVE = ["tests.models:countdown", "--model-name", "countdown", "--decoupled", "--max-batch-size", "0",
         "--input", "COUNT:int32:1", "--output", "VALUE:int32:1", "--no-allow-http", "--no-allow-metrics"]
GRPC_PORT = re.compile(r"Started GRPCInferenceService at [^:]+:(\d+)")


def serve(tree: Path | None) -> tuple[subprocess.Popen, int]:
    """A server of `tree` (None: this checkout) and its gRPC port."""
    env = dict(os.environ, PYTRITON_EXIT_WITH_PARENT="1", PYTHONSAFEPATH="1")  # PYTHONPATH picks the pytriton
    env["PYTHONPATH"] = str(REPO) if tree is None else f"{tree}:{REPO}"
    command = [sys.executable, "-m", "pytriton.cli", "serve", *SERVE, "--grpc-port", "0", "--grpc-address",
               "127.0.0.1"]
    server = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert server.stdout is not None
    grpc_port = 0
    for line in server.stdout:
        found = GRPC_PORT.search(line)
        grpc_port = int(found.group(1)) if found else grpc_port
        if "pytriton server ready" in line:
            break
    threading.Thread(target=server.stdout.read, daemon=True).start()
    if not grpc_port:
        server.kill()
        raise RuntimeError("the server did not start")
    return server, grpc_port


class Stream:
    """One client and its stream; `ask(n)` requests n responses and returns once the final one came."""

    def __init__(self, port: int):
        self.client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        self.done: queue.Queue = queue.Queue()
        self.received = 0
        self.client.start_stream(callback=self._on_response)

    def _on_response(self, result, error) -> None:
        if error is not None:
            self.done.put(error)
            return
        response = result.get_response()
        if response.parameters["triton_final_response"].bool_param:
            self.done.put(None)
        else:
            self.received += 1

    def ask(self, count: int) -> None:
        tensor = grpcclient.InferInput("COUNT", [1], "INT32")
        tensor.set_data_from_numpy(np.array([count], dtype=np.int32))
        self.client.async_stream_infer("countdown", [tensor], enable_empty_final_response=True)
        error = self.done.get(timeout=300)
        if error is not None:
            raise RuntimeError(f"stream failed: {error}")

    def close(self) -> None:
        self.client.stop_stream()
        self.client.close()


def measure(server: subprocess.Popen, port: int, responses: int, requests: int, streams: int) -> tuple[float, ...]:
    """(responses/s, server CPU µs per response, worker CPU µs per response)."""
    clients = [Stream(port) for _ in range(streams)]
    for client in clients:
        client.ask(200)  # warm-up
    workers = [threading.Thread(target=lambda c=c: [c.ask(responses) for _ in range(requests)]) for c in clients]
    cpu = [cpu_seconds([server.pid]), cpu_seconds(descendants(server.pid)[1:])]
    began = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - began
    total = responses * requests * streams
    cpu = [cpu_seconds([server.pid]) - cpu[0], cpu_seconds(descendants(server.pid)[1:]) - cpu[1]]
    for client in clients:
        client.close()
    return total / elapsed, cpu[0] * 1e6 / total, cpu[1] * 1e6 / total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--responses", type=int, default=10_000, help="responses per request")
    parser.add_argument("--requests", type=int, default=2, help="requests per stream and run")
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4], help="concurrent streams")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base", type=Path, help="a source tree to compare with (its pytriton/ is imported)")
    options = parser.parse_args()
    trees: dict[str, Path | None] = {"this": None} if options.base is None else {"base": options.base, "this": None}
    figures: dict[tuple[str, int], list[tuple[float, ...]]] = {}
    for repeat in range(options.repeats):
        for name, tree in sorted(trees.items(), reverse=bool(repeat % 2)):  # each goes first as often (ABBA)
            server, port = serve(tree)
            try:
                for streams in options.streams:
                    figure = measure(server, port, options.responses, options.requests, streams)
                    figures.setdefault((name, streams), []).append(figure)
                    print(f"{name:5} streams={streams:<3} {figure[0]:9.0f} responses/s, CPU per response: server "
                          f"{figure[1]:5.1f} µs, worker {figure[2]:5.1f} µs", flush=True)
            finally:
                server.terminate()
                server.wait(30)
    print("\nmedians (responses/s; server and worker CPU µs per response):")
    for streams in options.streams:
        medians = {name: [statistics.median(f[i] for f in figures[(name, streams)]) for i in range(3)]
                   for name in trees}
        line = f"streams={streams:<3}" + "".join(f"  {name} {m[0]:9.0f} {m[1]:5.1f} {m[2]:5.1f}"
                                                 for name, m in medians.items())
        if options.base is not None:
            line += f"  this/base {medians['this'][0] / medians['base'][0]:.3f}"
        print(line)


if __name__ == "__main__":
    main()
