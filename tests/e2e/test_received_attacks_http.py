"""Attacks on large HTTP bodies received into server-owned shared memory (issue 21): keep-alive alternating large and
small bodies, requests refused before any worker, HTTP/1.1 pipelining behind a request its worker holds. Every answer
is compared byte for byte; the session fixture checks /dev/shm after the servers stop.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._support.serving import serve
from tests._support.waits import wait_until
from tests.e2e.received import (
    IDENTITY,
    MIB,
    MODEL,
    digest,
    payload,
    receive_segments,
)


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:gated_identity", *IDENTITY) as process:
        yield process


@pytest.fixture(scope="module")
def digest_server():
    with serve("tests.models:gated_digest", *IDENTITY, "--instances", "2") as process:
        yield process


def test_http_keep_alive_large_small_large(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    try:
        for seed in range(60, 68):
            x, y = payload(seed, 2 * MIB if seed % 2 == 0 else 1000)
            inputs = [httpclient.InferInput("IN_X", [x.size], "UINT8"), httpclient.InferInput("IN_Y", [y.size], "FP32")]
            inputs[0].set_data_from_numpy(x, binary_data=True)
            inputs[1].set_data_from_numpy(y, binary_data=True)
            outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in ("OUT_X", "OUT_Y")]
            result = client.infer(MODEL, inputs, outputs=outputs)
            assert result.as_numpy("OUT_X").tobytes() == x.tobytes(), f"request {seed}"
            assert result.as_numpy("OUT_Y").tobytes() == y.tobytes(), f"request {seed}"
        assert len(receive_segments(server)) == 1
    finally:
        client.close()
    wait_until(lambda: not receive_segments(server), "the HTTP connection's segment to be unlinked")


@pytest.mark.parametrize("mistake", ["unknown model", "wrong datatype", "bad header"])
def test_http_requests_refused_before_any_worker_give_their_segment_back(server, mistake: str):
    x, y = payload(600, 2 * MIB)
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)

    def infer(model: str, x_type: str = "UINT8", extra: dict | None = None):
        inputs = [httpclient.InferInput("IN_X", [x.size], x_type), httpclient.InferInput("IN_Y", [y.size], "FP32")]
        inputs[0].set_data_from_numpy(x.view(np.int8) if x_type == "INT8" else x, binary_data=True)
        inputs[1].set_data_from_numpy(y, binary_data=True)
        outputs = [httpclient.InferRequestedOutput("OUT_X", binary_data=True)]
        return client.infer(model, inputs, outputs=outputs, parameters=extra).as_numpy("OUT_X")

    try:
        for i in range(5):  # (each mistake keeps the body's size: the good requests below have it too)
            with pytest.raises(InferenceServerException):
                if mistake == "unknown model":
                    infer("gated_identitY")
                elif mistake == "wrong datatype":
                    infer(MODEL, "INT8", {"p": "xx"})  # ("INT8" is one byte shorter than "UINT8")
                else:
                    infer(MODEL, extra={"binary_data_output": "x"})  # (a reserved parameter)
            assert len(receive_segments(server)) <= 1, f"after refused request {i}"
        for _ in range(2):
            extra = {"p": "x"} if mistake == "wrong datatype" else {"binary_data_outpuX": "x"} \
                if mistake == "bad header" else None
            assert infer(MODEL, extra=extra).tobytes() == x.tobytes()
        assert len(receive_segments(server)) == 1
    finally:
        client.close()
    wait_until(lambda: not receive_segments(server), "the HTTP connection's segment to be unlinked")


def _http_body(x: np.ndarray, base: Path) -> bytes:
    """A binary infer request for gated_digest (see `_gated_message`), its head and body."""
    parameters = (b'"parameters":{"started":"%s.started","release":"%s.release","digest":"%s.digest"},'
                  % (str(base).encode(), str(base).encode(), str(base).encode()))
    header = (b'{%s"inputs":[{"name":"IN_X","datatype":"UINT8","shape":[%d],"parameters":{"binary_data_size":%d}},'
              b'{"name":"IN_Y","datatype":"FP32","shape":[4],"parameters":{"binary_data_size":16}}],'
              b'"outputs":[{"name":"OUT_X","parameters":{"binary_data":true}}]}' % (parameters, x.size, x.size))
    body = header + x.tobytes() + np.arange(4, dtype=np.float32).tobytes()
    return (b"POST /v2/models/gated_digest/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(header), len(body))) + body


def test_http_pipelined_large_requests_never_overwrite_one_the_worker_holds(digest_server, tmp_path: Path):
    """HTTP/1.1 pipelining: a large request held by its worker, then more of the same size sent behind it on the
    connection before any answer is read (the server may read them while the first runs): the held one's model reads
    its own bytes; all answers come, in order."""
    import socket

    xs = [np.random.default_rng(700 + i).integers(0, 256, 2 * MIB, dtype=np.uint8) for i in range(5)]
    host, port = digest_server.http_url.split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.settimeout(60)
        answers = _Answers(sock)
        for i in range(2):  # the connection gets a segment of this size
            Path(f"{tmp_path / f'p{i}'}.release").touch()
            sock.sendall(_http_body(xs[i], tmp_path / f"p{i}"))
            assert answers.next().endswith(xs[i].tobytes())
        assert len(receive_segments(digest_server)) == 1
        sock.sendall(_http_body(xs[2], tmp_path / "p2"))
        wait_until(Path(f"{tmp_path / 'p2'}.started").exists, "the worker to hold the request")
        for i in (3, 4):  # pipelined behind it, released at once
            Path(f"{tmp_path / f'p{i}'}.release").touch()
            sock.sendall(_http_body(xs[i], tmp_path / f"p{i}"))
        Path(f"{tmp_path / 'p2'}.release").touch()
        for i in (2, 3, 4):
            assert digest(tmp_path / f"p{i}") == hashlib.sha256(xs[i].tobytes()).hexdigest(), \
                f"request {i}'s model read bytes another message overwrote"
            assert answers.next().endswith(xs[i].tobytes()), f"request {i}: OUT_X differs"
    wait_until(lambda: not receive_segments(digest_server), "the HTTP connection's segments to be unlinked")


class _Answers:
    """The bodies of the HTTP answers on a socket, one after another (pipelined answers kept apart)."""

    def __init__(self, sock) -> None:  # noqa: ANN001
        self.sock = sock
        self.data = b""

    def _fill(self, size: int) -> None:
        while len(self.data) < size:
            chunk = self.sock.recv(1 << 20)
            assert chunk, "the server closed the connection"
            self.data += chunk

    def next(self) -> bytes:
        while b"\r\n\r\n" not in self.data:
            self._fill(len(self.data) + 1)
        head, self.data = self.data.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200"), head
        fields = {k.strip().lower(): v.strip() for k, v in (line.split(b":", 1) for line in head.split(b"\r\n")[1:])}
        length = int(fields[b"content-length"])
        self._fill(length)
        body, self.data = self.data[:length], self.data[length:]
        return body
