"""scripts/bench-ray: pytriton.ray behind Ray Serve's HTTP proxy (see scripts/bench-ray for the rows)."""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import pathlib
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench-ray:start -->", "<!-- bench-ray:end -->"
WAIT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def body(model_elements: int) -> bytes:
    return json.dumps({"inputs": [{"name": "x", "shape": [1, model_elements], "datatype": "FP32",
                                   "data": [1.0] * model_elements}]}).encode()


def load(port: int, model: str, concurrency: int, duration_s: float, elements: int) -> dict:
    """`concurrency` clients, each a keep-alive connection sending one request after the other, for `duration_s`
    (after 1 s of warm-up): throughput, p50 and p99 latency, errors."""
    payload = body(elements)
    path = f"/v2/models/{model}/infer"
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = time.monotonic() + 1.0
    end = start + duration_s

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine: list[float] = []
        try:
            while True:
                sent = time.monotonic()
                if sent >= end:
                    break
                try:
                    conn.request("POST", path, payload, {"Content-Type": "application/json"})
                    response = conn.getresponse()
                    data = response.read()
                    if response.status != 200:
                        with lock:
                            errors.append(f"{response.status}: {data[:200]!r}")
                        continue
                except (OSError, http.client.HTTPException) as exc:
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                    continue
                done = time.monotonic()
                if start <= done <= end:  # answers within the window count, whenever they were sent
                    mine.append(done - sent)
        finally:
            conn.close()
            with lock:
                latencies.extend(mine)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(duration_s + 70)
    latencies.sort()
    return {
        "throughput": len(latencies) / duration_s,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else float("nan"),
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000 if latencies else float("nan"),
        "count": len(latencies), "errors": len(errors), "first_error": errors[0] if errors else "",
    }


def wait_ready(port: int, model: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", f"/v2/models/{model}/ready")
            if conn.getresponse().status == 200:
                conn.close()
                return
            conn.close()
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"model {model} on port {port} not ready within {WAIT_S:.0f} s")


def serve_rows(args: argparse.Namespace) -> list[dict]:
    import numpy
    import ray
    from ray import serve

    import pytriton.ray
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor

    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(SCRIPTS), os.environ.get("PYTHONPATH")) if p)
    sys.path.insert(0, str(SCRIPTS))
    import bench_ray_models

    rows = []
    port = free_port()
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        tensor = [Tensor(name="x", dtype=numpy.float32, shape=(-1,))]
        out = [Tensor(name="y", dtype=numpy.float32, shape=(-1,))]

        def run(label: str, app, model: str, concurrency: int, elements: int, replicas: int) -> None:
            serve.run(app, name="bench", route_prefix="/", blocking=False)
            deadline = time.monotonic() + WAIT_S
            while True:
                status = serve.status().applications.get("bench")
                running = status.deployments["TritonReplica"].replica_states.get("RUNNING", 0) \
                    if status is not None and "TritonReplica" in status.deployments else 0
                if status is not None and status.status == "RUNNING" and running == replicas:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{label}: not running within {WAIT_S:.0f} s")
                time.sleep(0.5)
            wait_ready(port, model)
            result = load(port, model, concurrency, args.duration, elements)
            result.update(label=label, concurrency=concurrency)
            print(f"{label:<55} c={concurrency:<3} {result['throughput']:8.1f} infer/s  p50 {result['p50_ms']:7.1f} ms"
                  f"  p99 {result['p99_ms']:7.1f} ms  errors {result['errors']} {result['first_error']}", flush=True)
            rows.append(result)
            serve.delete("bench")

        for replicas in (1, 2, 4):
            app = pytriton.ray.from_callable(
                "sleepy", bench_ray_models.sleepy, tensor, out, config=ModelConfig(max_batch_size=1),
                num_replicas=replicas, max_ongoing_requests=64, ray_actor_options={"num_cpus": 0.5})
            run(f"sleep 100 ms, {replicas} replica(s), no batching", app, "sleepy", 32, 16, replicas)
        app = pytriton.ray.from_callable(
            "sleepy", bench_ray_models.sleepy, tensor, out,
            config=ModelConfig(max_batch_size=32, batcher=DynamicBatcher(max_queue_delay_microseconds=5000)),
            num_replicas=1, max_ongoing_requests=64, ray_actor_options={"num_cpus": 0.5})
        run("sleep 100 ms, 1 replica, dynamic batching (max 32)", app, "sleepy", 32, 16, 1)
        for concurrency in (1, 8):
            app = pytriton.ray.from_callable(
                "double", bench_ray_models.double, tensor, out, config=ModelConfig(max_batch_size=8),
                num_replicas=1, max_ongoing_requests=64, ray_actor_options={"num_cpus": 0.5})
            run("16 floats, Ray Serve (1 replica)", app, "double", concurrency, 16, 1)
    finally:
        serve.shutdown()
        ray.shutdown()
    return rows


def direct_rows(args: argparse.Namespace) -> list[dict]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(SCRIPTS), os.environ.get("PYTHONPATH")) if p))
    server = subprocess.Popen(
        [sys.executable, "-m", "pytriton.cli", "serve", "bench_ray_models:double", "--input", "x:fp32:-1",
         "--output", "y:fp32:-1", "--max-batch-size", "8", "--http-port", str(port), "--http-address", "127.0.0.1",
         "--grpc-port", "0", "--grpc-address", "127.0.0.1", "--metrics-port", "0", "--metrics-address", "127.0.0.1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = []
    try:
        wait_ready(port, "double")
        for concurrency in (1, 8):
            result = load(port, "double", concurrency, args.duration, 16)
            result.update(label="16 floats, our server directly (pytriton serve)", concurrency=concurrency)
            print(f"{result['label']:<55} c={concurrency:<3} {result['throughput']:8.1f} infer/s  p50 "
                  f"{result['p50_ms']:7.1f} ms  p99 {result['p99_ms']:7.1f} ms  errors {result['errors']}", flush=True)
            rows.append(result)
    finally:
        server.send_signal(2)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return rows


def section(rows: list[dict], duration: float) -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    try:
        load_avg = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        load_avg = "n/a"
    import ray

    by = {(r["label"], r["concurrency"]): r for r in rows}
    one = by.get(("sleep 100 ms, 1 replica(s), no batching", 32))
    four = by.get(("sleep 100 ms, 4 replica(s), no batching", 32))
    ratio = four["throughput"] / one["throughput"] if one and four and one["throughput"] else float("nan")
    lines = [
        START, "## Ray Serve (scripts/bench-ray)", "",
        f"Measured {now} on {platform.node() or 'this machine'} ({os.cpu_count()} cores; load average before the run "
        f"{load_avg}; other work was running on the machine), Ray {ray.__version__}, one local Ray node, Serve's "
        f"HTTP proxy on 127.0.0.1. Clients: Python threads with keep-alive connections, JSON requests of 16 floats, "
        f"{duration:.0f} s per row after 1 s of warm-up. Replicas take up to 64 requests each "
        f"(`max_ongoing_requests=64`): the queue is our scheduler's, not Serve's router's.", "",
        "| Row | Concurrency | Throughput (infer/s) | p50 (ms) | p99 (ms) | Errors |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['label']} | {r['concurrency']} | {r['throughput']:.1f} | {r['p50_ms']:.1f} | "
                     f"{r['p99_ms']:.1f} | {r['errors']} |")
    verdict = "✅" if ratio >= 3.5 else "❌"
    lines += ["", f"4 replicas / 1 replica (sleeping model, c=32): **{ratio:.2f}×** {verdict} (target ≥ 3.5×).", "",
              "Serve's proxy and the ingress hop cost CPU per request: compare the two 16-float rows (Serve with one "
              "replica vs our server directly) — Ray Serve is for scaling out, not for speed on one machine.", "",
              "```", "scripts/bench-ray              # writes this section", "```", END]
    return "\n".join(lines) + "\n"


def write(text: str) -> None:
    doc = DOC.read_text() if DOC.exists() else ""
    if START in doc and END in doc:
        head, rest = doc.split(START, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        doc = head + text + ("\n" + tail if tail else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    DOC.write_text(doc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=15.0, help="seconds measured per row")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args()
    rows = serve_rows(args) + direct_rows(args)
    text = section(rows, args.duration)
    print(text)
    if not args.no_write:
        write(text)
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
