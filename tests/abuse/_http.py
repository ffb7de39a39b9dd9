"""Raw-socket helpers for the HTTP/1.1 abuse tests: requests no well-behaved client would send, and the answers."""

from __future__ import annotations

import json
import resource
import socket
import time

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.conftest import tensor_args

TIMEOUT_S = 30
ADD_SUB = (
    ["--max-batch-size", "8"]
    + tensor_args("input", [("INPUT0", "int32", "16"), ("INPUT1", "int32", "16")])
    + tensor_args("output", [("OUTPUT0", "int32", "16"), ("OUTPUT1", "int32", "16")])
)
INFER_PATH = "/v2/models/add_sub/infer"


def connect(url: str, timeout_s: float = TIMEOUT_S) -> socket.socket:
    host, port = url.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_response(sock: socket.socket, buffer: bytearray | None = None) -> tuple[int, dict[str, str], bytes]:
    """One Content-Length-framed response: (status, lower-cased headers, body); extra bytes stay in `buffer`."""
    buffer = bytearray() if buffer is None else buffer
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a full response (got {bytes(buffer[:200])!r})"
        buffer += chunk
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers["content-length"])
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed before the full body"
        rest += chunk
    buffer[:] = rest[length:]
    return status, headers, rest[:length]


def error_message(headers: dict[str, str], body: bytes) -> str:
    """The message of a `{"error": msg}` JSON answer."""
    assert headers.get("content-type") == "application/json", (headers, body)
    decoded = json.loads(body)
    assert isinstance(decoded, dict) and list(decoded) == ["error"], decoded
    return decoded["error"]


def closed_by_server(sock: socket.socket, timeout_s: float = TIMEOUT_S) -> bool:
    """The server closed (or reset) the connection within `timeout_s`, sending nothing more."""
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def check_serves(url: str) -> None:
    """An ordinary tritonclient.http request is answered correctly."""
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    b = np.full((2, 16), 3, dtype=np.int32)
    inputs = []
    for name, array in (("INPUT0", a), ("INPUT1", b)):
        tensor = httpclient.InferInput(name, [2, 16], "INT32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    with httpclient.InferenceServerClient(url, network_timeout=TIMEOUT_S) as client:
        result = client.infer("add_sub", inputs)
        assert client.is_server_ready()
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def raise_fd_limit(wanted: int) -> None:
    """Raise this process's soft limit on open files to `wanted` (skip the test if the hard limit is lower)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"needs {wanted} open files, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def peak_rss_while(pid: int, seconds: float, sample) -> int:
    """The highest value of `sample(pid)` seen over `seconds` (polled every 50 ms)."""
    peak = sample(pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)
        peak = max(peak, sample(pid))
    return peak
