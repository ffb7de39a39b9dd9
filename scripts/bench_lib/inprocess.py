"""In-process rows of the benchmark: the model of serve_double.py (y = 2x, FP32, max_batch_size 64, one instance,
no dynamic batching) as a Python-backend repository, served by an in-process `tritonserver.Server`, measured from
the calling thread, with the gRPC and HTTP front-ends of the same server (`tritonfrontend`) beside it:

    python scripts/bench_lib/inprocess.py [--duration S] [--warmup S] [--json PATH]

Modes: `sync` (`model.infer`, one request at a time), `async` (`async_infer` awaited on an asyncio loop in the
calling thread, `--async-concurrency` requests in flight), `grpc` and `http` (tritonclient in this process against
KServeGrpc / KServeHttp, one request at a time: the client shares the process, and its GIL, with the server).
Each (mode, size) runs `--duration` seconds after `--warmup`; latencies are per request, from the call to the
last output in hand (as a numpy view). Runs under this repository's venv (it imports pytriton); scripts/bench
starts it as a subprocess and reads the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

SIZES = {"small": ("double_small", 16), "1mib": ("double_1mib", 262144)}  # as cases.SIZES
MODES = ("sync", "async", "grpc", "http")

MODEL_PY = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(
            "OUTPUT", pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy() * np.float32(2))]) for r in requests]
'''

CONFIG = '''name: "{name}"
backend: "python"
max_batch_size: 64
input [ {{ name: "INPUT" data_type: TYPE_FP32 dims: [ {n} ] }} ]
output [ {{ name: "OUTPUT" data_type: TYPE_FP32 dims: [ {n} ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
'''


def write_repository(root: Path) -> Path:
    for name, n in SIZES.values():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(CONFIG.format(name=name, n=n))
        (root / name / "1" / "model.py").write_text(MODEL_PY)
    return root


def percentile(sorted_us: list[float], q: float) -> float:
    return sorted_us[min(len(sorted_us) - 1, int(q * len(sorted_us)))]


def row(mode: str, size: str, concurrency: int, latencies_s: list[float], elapsed_s: float) -> dict[str, Any]:
    us = sorted(x * 1e6 for x in latencies_s)
    return {"mode": mode, "size": size, "concurrency": concurrency, "n": len(us),
            "throughput": len(us) / elapsed_s, "p50_us": statistics.median(us), "p99_us": percentile(us, 0.99)}


def timed_loop(call: Callable[[], None], duration_s: float, warmup_s: float) -> tuple[list[float], float]:
    """Call `call` back to back: warm-up, then `duration_s` of timed calls; (latencies, elapsed)."""
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        call()
    latencies = []
    start = time.perf_counter()
    end = start + duration_s
    while True:
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        latencies.append(t1 - t0)
        if t1 >= end:
            return latencies, t1 - start


async def async_loop(model: Any, data: Any, concurrency: int, duration_s: float, warmup_s: float
                     ) -> tuple[list[float], float]:  # fmt: skip
    import numpy

    latencies: list[float] = []

    async def one() -> None:
        async for response in model.async_infer(inputs={"INPUT": data}):
            numpy.from_dlpack(response.outputs["OUTPUT"])

    async def worker(until: float, record: bool) -> None:
        while time.perf_counter() < until:
            t0 = time.perf_counter()
            await one()
            if record:
                latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker(time.perf_counter() + warmup_s, False) for _ in range(concurrency)))
    start = time.perf_counter()
    await asyncio.gather(*(worker(start + duration_s, True) for _ in range(concurrency)))
    return latencies, time.perf_counter() - start


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import numpy
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    import tritonfrontend
    import tritonserver

    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-inprocess-") as tmp:
        server = tritonserver.Server(model_repository=str(write_repository(Path(tmp))), exit_timeout=10)
        server.start(wait_until_ready=True, timeout=120)
        grpc = tritonfrontend.KServeGrpc(server, tritonfrontend.KServeGrpc.Options(address="127.0.0.1", port=0))
        http = tritonfrontend.KServeHttp(server, tritonfrontend.KServeHttp.Options(address="127.0.0.1", port=0))
        try:
            with grpc, http:
                gclient = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc.port}")
                hclient = httpclient.InferenceServerClient(f"127.0.0.1:{http.port}", connection_timeout=60,
                                                           network_timeout=60)
                for size in args.sizes:
                    name, n = SIZES[size]
                    data = numpy.ones((1, n), numpy.float32)
                    model = server.model(name)
                    expected = 2.0 * n

                    def sync() -> None:
                        for response in model.infer(inputs={"INPUT": data}):
                            out = numpy.from_dlpack(response.outputs["OUTPUT"])
                        if float(out.sum()) != expected:
                            problems.append(f"sync {size}: wrong output")

                    def network(client: Any, module: Any) -> Callable[[], None]:
                        tensor = module.InferInput("INPUT", [1, n], "FP32")
                        tensor.set_data_from_numpy(data)

                        def call() -> None:
                            client.infer(name, [tensor]).as_numpy("OUTPUT")
                        return call

                    for mode in args.modes:
                        concurrencies = args.async_concurrency if mode == "async" else [1]
                        for c in concurrencies:
                            if mode == "async":
                                lat, elapsed = asyncio.run(async_loop(model, data, c, args.duration, args.warmup))
                            else:
                                call = {"sync": sync, "grpc": network(gclient, grpcclient),
                                        "http": network(hclient, httpclient)}[mode]
                                lat, elapsed = timed_loop(call, args.duration, args.warmup)
                            rows.append(row(mode, size, c, lat, elapsed))
                            print(f"[inprocess] {size:<5} {mode:<5} c={c:<2} {rows[-1]['throughput']:9.1f}/s  "
                                  f"p50 {rows[-1]['p50_us'] / 1000:7.3f} ms  p99 {rows[-1]['p99_us'] / 1000:7.3f} ms",
                                  file=sys.stderr, flush=True)
                gclient.close()
                hclient.close()
        finally:
            server.stop()
    left = [e for e in os.listdir("/dev/shm") if e.startswith("pytriton_") and f"_{os.getpid()}_" in e]
    if left:
        problems.append(f"in-process server left /dev/shm files: {left}")
    return {"rows": rows, "problems": sorted(set(problems))}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--duration", type=float, default=3.0, help="timed seconds per (mode, size, concurrency)")
    p.add_argument("--warmup", type=float, default=0.5, help="untimed seconds before each")
    p.add_argument("--sizes", default="small,1mib")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--async-concurrency", default="1,8", help="requests in flight for `async` (comma-separated)")
    p.add_argument("--json", type=Path, help="write the rows here (default: stdout)")
    args = p.parse_args(argv)
    args.sizes = [s for s in args.sizes.split(",") if s]
    args.modes = [m for m in args.modes.split(",") if m]
    args.async_concurrency = [int(c) for c in args.async_concurrency.split(",") if c]
    if set(args.sizes) - set(SIZES) or set(args.modes) - set(MODES):
        p.error(f"sizes: {', '.join(SIZES)}; modes: {', '.join(MODES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = measure(args)
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text)
    else:
        print(text)
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
