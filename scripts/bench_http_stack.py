#!/usr/bin/env python3
"""Which HTTP stack should serve Triton's REST API? Measures requests/s of the candidates side by side.

Every candidate answers the same small binary infer request (16 FP32, Triton's binary tensor extension:
JSON header + raw bytes; y = 2x) with the same handler code; only the HTTP layer differs:
  raw-httptools         pytriton.frontend.http1 (asyncio + httptools), default asyncio loop
  raw-httptools-uvloop  the same on uvloop
  uvicorn-asgi          uvicorn (httptools + uvloop) with a bare ASGI app, no framework
Load: wrk (Debian package `wrk`) on loopback, keep-alive, 1 thread x 8 connections, bounded in time.
Usage: scripts/bench_http_stack.py [--seconds 5] [--repeats 3]   (prints a table; --markdown for docs)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

HEADER = json.dumps(
    {"inputs": [{"name": "INPUT", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": 64}}],
     "outputs": [{"name": "OUTPUT", "parameters": {"binary_data": True}}]}
).encode()
BODY = HEADER + np.arange(16, dtype=np.float32).tobytes()

HANDLER = '''
import numpy as np, orjson
def answer(body, header_length):
    head = orjson.loads(body[:header_length])
    size = head["inputs"][0]["parameters"]["binary_data_size"]
    x = np.frombuffer(body, dtype=np.float32, count=size // 4, offset=header_length)
    y = (x * 2).tobytes()
    out = orjson.dumps({"model_name": "double", "model_version": "1", "outputs": [
        {"name": "OUTPUT", "datatype": "FP32", "shape": [1, 16], "parameters": {"binary_data_size": len(y)}}]})
    return out, y
'''

SERVERS = {
    "raw-httptools": HANDLER + '''
import asyncio, sys
from pytriton.frontend.http1 import HttpListener, HttpResponse
async def handle(request):
    hl = int(request.headers["inference-header-content-length"])
    out, y = answer(request.body, hl)
    return HttpResponse(200, [out, y], [("Content-Type", "application/octet-stream"),
                                        ("Inference-Header-Content-Length", str(len(out)))])
async def main(port):
    server = HttpListener(handle, "127.0.0.1", port, "raw-httptools")
    await server.start()
    print("ready", flush=True)
    await asyncio.Event().wait()
if len(sys.argv) > 2 and sys.argv[2] == "uvloop":
    import uvloop; uvloop.install()
asyncio.run(main(int(sys.argv[1])))
''',
    "uvicorn-asgi": HANDLER + '''
import sys, uvicorn
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    headers = dict(scope["headers"])
    out, y = answer(b"".join(chunks), int(headers[b"inference-header-content-length"]))
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/octet-stream"), (b"content-length", str(len(out) + len(y)).encode()),
        (b"inference-header-content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out + y})
print("ready", flush=True)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="error", access_log=False,
            http="httptools", loop="uvloop")
''',
}

CANDIDATES = [("raw-httptools", "raw-httptools", []), ("raw-httptools-uvloop", "raw-httptools", ["uvloop"]),
              ("uvicorn-asgi", "uvicorn-asgi", [])]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


def run_wrk(port: int, seconds: int, lua: str) -> float:
    out = subprocess.run(
        ["wrk", "-t1", "-c8", f"-d{seconds}s", "-s", lua, f"http://127.0.0.1:{port}/v2/models/double/infer"],
        capture_output=True, text=True, check=True,
    ).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if "Non-2xx" in out or match is None:
        raise RuntimeError(f"wrk reported errors:\n{out}")
    return float(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is required: apt-get install wrk", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        body_file = os.path.join(tmp, "body.bin")
        with open(body_file, "wb") as f:
            f.write(BODY)
        lua = os.path.join(tmp, "post.lua")
        with open(lua, "w") as f:
            f.write(textwrap.dedent(f'''
                local f = io.open("{body_file}", "rb"); local body = f:read("*all"); f:close()
                wrk.method = "POST"; wrk.body = body
                wrk.headers["Inference-Header-Content-Length"] = "{len(HEADER)}"
                wrk.headers["Content-Type"] = "application/octet-stream"
            '''))
        scripts = {}
        for name, code in SERVERS.items():
            scripts[name] = os.path.join(tmp, f"{name}.py")
            with open(scripts[name], "w") as f:
                f.write(code)
        results: dict[str, list[float]] = {name: [] for name, _, _ in CANDIDATES}
        for _ in range(args.repeats):  # interleave candidates so machine noise spreads evenly
            for name, script, extra in CANDIDATES:
                port = free_port()
                proc = subprocess.Popen([sys.executable, scripts[script], str(port), *extra], stdout=subprocess.DEVNULL)
                try:
                    wait_port(port)
                    results[name].append(run_wrk(port, args.seconds, lua))
                finally:
                    proc.terminate()
                    proc.wait(10)
    base = statistics.median(results["raw-httptools"])
    rows = [(name, statistics.median(v), min(v), max(v), statistics.median(v) / base) for name, v in results.items()]
    if args.markdown:
        print("| stack | median req/s | min | max | vs raw-httptools |\n| --- | --- | --- | --- | --- |")
        for name, med, lo, hi, ratio in rows:
            print(f"| {name} | {med:,.0f} | {lo:,.0f} | {hi:,.0f} | {ratio:.2f} |")
    else:
        for name, med, lo, hi, ratio in rows:
            print(f"{name:22s} median {med:9.0f} req/s  (min {lo:.0f}, max {hi:.0f})  x{ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
