"""Memory of a server under oversized repository requests: a 50 MB configuration override, three times, over HTTP and
over gRPC. Seen before the bounds: the server grew from 69 MB to 565 MB (HTTP) and 701 MB (gRPC) and kept 394 MB
afterwards; the repository extension's gRPC messages could be 2 GiB. Now the gRPC message is refused by the transport
before it is read, and the HTTP body (under the HTTP input limit, 64 MiB) is refused before it is parsed. (What the
server keeps afterwards is malloc's: `pytriton serve` tunes glibc to keep up to 256 MiB of freed heap for reuse, which
the next large body takes again; so the peak over three requests is what is bounded.)

`python -m tests.abuse.test_repository_memory` prints the figures (docs/security.md)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.rss import rss_bytes
from tests._support.serving import serve

pytestmark = pytest.mark.slow

SIZE = 50 * 1000 * 1000
BOUND = {"http": 128 << 20, "grpc": 32 << 20}  # peak growth: HTTP holds the body it read (its buffer grows by halves)
REQUESTS = 3


def _override() -> str:
    parameters = {f"p{i}": {"string_value": "v" * 1000} for i in range(SIZE // 1030)}
    return json.dumps({"name": "m", "backend": "python", "input": [], "output": [], "parameters": parameters})


def _http(url: str, config: str) -> str:
    body = json.dumps({"parameters": {"config": config}}).encode()
    request = urllib.request.Request(f"http://{url}/v2/repository/models/m/load", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code} {exc.read()[:160].decode(errors='replace')}"


def _grpc(url: str, config: str) -> str:
    client = grpcclient.InferenceServerClient(url)
    try:
        client.load_model("m", config=config)
        return "loaded"
    except InferenceServerException as exc:
        return f"{exc.status()} {exc.message()[:160]}"
    finally:
        client.close()


def measure(protocol: str, repo: Path) -> tuple[int, int, str]:
    """(peak RSS growth, growth once answered, what the client got) of three 50 MB overrides over `protocol`."""
    config = _override()
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit") as server:
        pid = server.process.pid
        baseline = rss_bytes(pid)
        peak = [baseline]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], rss_bytes(pid))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            for _ in range(REQUESTS):
                outcome = (_http if protocol == "http" else _grpc)(
                    server.http_url if protocol == "http" else server.grpc_url, config)
        finally:
            done.set()
            sampler.join()
        after = rss_bytes(pid)
        assert grpcclient.InferenceServerClient(server.grpc_url).is_server_live()
        return peak[0] - baseline, after - baseline, outcome


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_oversized_override_keeps_memory_bounded(protocol, tmp_path):
    (tmp_path / "m" / "1").mkdir(parents=True)
    peak, after, outcome = measure(protocol, tmp_path)
    print(f"{protocol}: peak +{peak / 2**20:.0f} MiB, after +{after / 2**20:.0f} MiB ({outcome})")
    assert "loaded" not in outcome and not outcome.startswith("HTTP 200"), outcome
    assert peak < BOUND[protocol], f"{protocol}: the server grew by {peak / 2**20:.0f} MiB ({outcome})"


if __name__ == "__main__":
    import tempfile

    for name in ("http", "grpc"):
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "m" / "1").mkdir(parents=True)
            growth, kept, what = measure(name, Path(folder))
            print(f"{name}: peak +{growth / 2**20:.0f} MiB, kept +{kept / 2**20:.0f} MiB: {what}")
