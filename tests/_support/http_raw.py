"""HTTP/1.1 helpers shared by the e2e and abuse suites: one raw response off a socket, and an ordinary
tritonclient.http request that must succeed."""

from __future__ import annotations

import socket

import numpy as np
import tritonclient.http as httpclient

TIMEOUT_S = 30


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


def check_add_sub_serves(url: str) -> None:
    """The add_sub model (INPUT0/INPUT1 INT32 [-1,16]) answers an ordinary tritonclient.http request correctly."""
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    b = np.full((2, 16), 3, dtype=np.int32)
    inputs = []
    for name, array in (("INPUT0", a), ("INPUT1", b)):
        tensor = httpclient.InferInput(name, [2, 16], "INT32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    with httpclient.InferenceServerClient(url, network_timeout=TIMEOUT_S) as client:
        result = client.infer("add_sub", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
