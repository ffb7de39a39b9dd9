"""Raw-socket helpers for the HTTP/1.1 abuse tests: requests no well-behaved client would send, and the answers."""

from __future__ import annotations

import json
import resource
import socket
import time

import pytest
import tritonclient.http as httpclient

from tests._support.http_raw import TIMEOUT_S, check_add_sub_serves, read_response
from tests._support.serving import tensor_args

__all__ = ["ADD_SUB", "INFER_PATH", "check_serves", "closed_by_server", "connect", "error_message", "peak_rss_while",
           "raise_fd_limit", "read_response"]

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
    """The server is up: ready, and an ordinary tritonclient.http inference succeeds."""
    with httpclient.InferenceServerClient(url, network_timeout=TIMEOUT_S) as client:
        assert client.is_server_ready()
    check_add_sub_serves(url)


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
