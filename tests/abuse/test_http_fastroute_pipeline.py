"""Attacks on the HTTP callback route's place in a connection's pipeline (`frontend/http1/connection.py`): requests
answered from a job's callback, at once, or by `HttpApp.handle` mixed in one write must be answered in request
order; `Connection: close` and HTTP/1.0 end the connection after their answer; a client that leaves withdraws its
request exactly once; one that does not read its answers stops the connection, not the server."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import threading
import time
import urllib.request

import numpy as np
import pytest

from tests._support.serving import ServerProcess, lazy_servers, serve, tensor_args
from tests._support.waits import wait_until
from tests.abuse._fastroute import Answer, header, raw_request
from tests.abuse._http import connect, read_response
from tests.tls.certs import make_certs

TIMEOUT_S = 30
ADD_SUB = (["--max-batch-size", "8"]
           + tensor_args("input", [("INPUT0", "int32", "16"), ("INPUT1", "int32", "16")])
           + tensor_args("output", [("OUTPUT0", "int32", "16"), ("OUTPUT1", "int32", "16")]))
SERVERS = {
    "add_sub": ("tests.models:add_sub", ADD_SUB),
    "restricted": ("tests.models:add_sub", ADD_SUB + ["--http-restricted-api", "inference:infer-token=abc"]),
    "identity": ("tests.models:identity", tensor_args("input", [("IN_X", "uint8", "-1")])
                 + tensor_args("output", [("OUT_X", "uint8", "-1")])),
}
PATH = "/v2/models/add_sub/infer"


@pytest.fixture(scope="module")
def servers():
    yield from lazy_servers(SERVERS)


def _add_sub(value: int, shape=(1, 16), sizes=(64, 64)) -> tuple[bytes, int]:
    head = header([("INPUT0", "INT32", list(shape), sizes[0]), ("INPUT1", "INT32", list(shape), sizes[1])],
                  binary_outputs=["OUTPUT0"])
    data = np.full(16, value, dtype=np.int32).tobytes() + np.full(16, 1000, dtype=np.int32).tobytes()
    return head + data[: sizes[0] + sizes[1]] + b"\0" * max(0, sizes[0] + sizes[1] - len(data)), len(head)


def _output0(answer: Answer) -> list[int]:
    return np.frombuffer(answer.binary, dtype=np.int32).tolist()


def _stats(server, model: str) -> tuple[int, int]:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{model}/stats", timeout=TIMEOUT_S) as answer:
        stats = json.loads(answer.read())["model_stats"][0]["inference_stats"]
    return stats["success"]["count"], stats["fail"]["count"]


def _get(path: str, extra: bytes = b"", version: bytes = b"HTTP/1.1") -> bytes:
    return b"GET %s %s\r\nHost: x\r\n%s\r\n" % (path.encode(), version, extra)


def test_a_mixed_pipeline_is_answered_in_request_order(servers):
    """One write: callback-route requests, gzip (coroutine route), a health check, an unknown model, a request
    failing validation, a malformed header, a repository index (POST) and a HEAD: each answer in its place."""
    server = servers["add_sub"]
    good = [_add_sub(v) for v in range(1, 12)]
    bad_size, bad_length = _add_sub(99, sizes=(60, 64))
    wire = [
        (raw_request(PATH, *good[0]), ("ok", 1)),
        (raw_request(PATH, *good[1], gzip_answer=True), ("ok", 2)),
        (_get("/v2/health/ready"), ("status", 200)),
        (raw_request(PATH, *good[2]), ("ok", 3)),
        (raw_request("/v2/models/nope/infer", *good[3]), ("status", 404)),
        (raw_request(PATH, *good[4]), ("ok", 5)),
        (raw_request(PATH, bad_size, bad_length), ("status", 400)),
        (raw_request(PATH, *good[5]), ("ok", 6)),
        (raw_request(PATH, b"{not json", 9), ("status", 400)),
        (raw_request(PATH, *good[6], gzip_answer=True), ("ok", 7)),
        (raw_request("/v2/repository/index", b"{}", None), ("status", 200)),
        (raw_request(PATH, *good[7]), ("ok", 8)),
        (b"HEAD /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n", ("head", b"405")),  # (its head only)
        (raw_request(PATH, *good[8]), ("ok", 9)),
        (raw_request("/v2/models/add_sub/versions/7/infer", *good[9]), ("status", 404)),
        (raw_request(PATH, *good[10]), ("ok", 11)),
    ]
    before = _stats(server, "add_sub")
    with connect(server.http_url) as sock:
        for rounds in range(3):  # (later rounds: every header is kept; the last: more than max_pipelined at once)
            repeat = 8 if rounds == 2 else 1
            sock.sendall(b"".join(request for request, _ in wire) * repeat)
            buffer = bytearray()
            for index, (_, (kind, expected)) in enumerate(wire * repeat):
                if kind == "head":
                    while b"\r\n\r\n" not in buffer:
                        buffer += sock.recv(65536)
                    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
                    assert head.split()[1] == expected, (index, head)
                    buffer[:] = rest
                    continue
                status, headers, data = read_response(sock, buffer)
                if kind == "ok":
                    answer = Answer(status, headers, data)
                    assert status == 200 and _output0(answer) == [expected + 1000] * 16, (rounds, index, answer)
                else:
                    assert status == expected, (rounds, index, status, data)
            assert not buffer
    success, fail = _stats(server, "add_sub")
    assert (success - before[0], fail - before[1]) == (10 * 9, 0)  # (refused before submission: not counted)


def test_connection_close_and_http10_end_the_pipeline(servers):
    server = servers["add_sub"]
    one, two = _add_sub(1), _add_sub(2)
    before = _stats(server, "add_sub")
    for closing in (raw_request(PATH, *two, extra=b"Connection: close\r\n"),
                    raw_request(PATH, *two, version=b"HTTP/1.0"),
                    raw_request(PATH, *two, gzip_answer=True, extra=b"Connection: close\r\n")):
        with connect(server.http_url) as sock:
            sock.sendall(raw_request(PATH, *one) + closing + raw_request(PATH, *one) + raw_request(PATH, *one))
            buffer = bytearray()
            first = Answer(*read_response(sock, buffer))
            status, headers, data = read_response(sock, buffer)
            assert _output0(first) == [1001] * 16 and _output0(Answer(status, headers, data)) == [1002] * 16
            assert headers.get("connection") == "close"
            tail = bytes(buffer)
            while chunk := sock.recv(65536):
                tail += chunk
            assert tail == b""  # nothing after the closing answer: the requests behind it are not run
    assert _stats(server, "add_sub") == (before[0] + 6, before[1])
    # HTTP/1.0 with keep-alive asked for: answered and kept open
    with connect(server.http_url) as sock:
        buffer = bytearray()
        for value in (3, 4):
            sock.sendall(raw_request(PATH, *_add_sub(value), version=b"HTTP/1.0", extra=b"Connection: keep-alive\r\n"))
            assert _output0(Answer(*read_response(sock, buffer))) == [value + 1000] * 16


def test_restricted_inference_in_a_pipeline(servers):
    server = servers["restricted"]
    body, length = _add_sub(5)
    tokens = [b"infer-token: abc\r\n", b"", b"infer-token: abd\r\n", b"infer-token: abc\r\n"]
    with connect(server.http_url) as sock:
        for gzip_answer in (False, True):
            sock.sendall(b"".join(raw_request(PATH, body, length, gzip_answer, token) for token in tokens))
            buffer = bytearray()
            answers = [Answer(*read_response(sock, buffer)) for _ in tokens]
            assert [a.status for a in answers] == [200, 403, 403, 200]
            assert answers[1].json == {"error": "This API is restricted, expecting header 'infer-token'"}


def _answered_in_order_once_read(server, body: bytes, length: int, count: int) -> None:
    sock = connect(server.http_url)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    with sock:
        sock.setblocking(False)
        wire = raw_request("/v2/models/identity/infer", body, length) * count
        sent = 0
        deadline = time.monotonic() + TIMEOUT_S
        while sent < len(wire) and time.monotonic() < deadline:  # the server stops reading at some point
            try:
                sent += sock.send(wire[sent:])
            except BlockingIOError:
                break
        # another client is served meanwhile
        with connect(server.http_url) as other:
            other.sendall(raw_request("/v2/models/identity/infer", body, length))
            answer = Answer(*read_response(other, bytearray()))
            assert answer.status == 200 and answer.binary == body[length:]
        sock.setblocking(True)
        if sent < len(wire):  # (reading the answers lets the server read the rest)
            sender = threading.Thread(target=sock.sendall, args=(wire[sent:],), daemon=True)
            sender.start()
        buffer = bytearray()
        for index in range(count):
            answer = Answer(*read_response(sock, buffer))
            assert answer.status == 200 and answer.binary == body[length:], index


def test_a_client_that_does_not_read_large_answers(servers):
    """Large bodies (received straight into their own buffers) through the callback route, 24 pipelined 1 MiB
    requests whose answers the client reads only later: all answered, in order, with their data."""
    server = servers["identity"]
    data = np.random.default_rng(7).integers(0, 255, 1 << 20, dtype=np.uint8).tobytes()
    head = header([("IN_X", "UINT8", [len(data)], len(data))], binary_outputs=["OUT_X"])
    _answered_in_order_once_read(server, head + data, len(head), 24)


def test_a_client_leaving_mid_pipeline_withdraws_once(tmp_path):
    """The one instance runs a gated request; a second client pipelines three requests and closes: its first is
    withdrawn from the queue (one CANCELED failure), the two behind it never start; the server answers on."""
    gated = tensor_args("input", [("INPUT", "fp32", "-1")]) + tensor_args("output", [("PID", "int64", "1")])
    with serve("tests.models:gated_pid", *gated, env={"PYTRITON_PIPELINE_DEPTH": "1"}) as server:
        started, release = tmp_path / "started", tmp_path / "release"

        def gated_body(parameters: dict) -> tuple[bytes, int]:
            head = header([("INPUT", "FP32", [4], 16)], parameters=parameters)
            return head + np.zeros(4, dtype=np.float32).tobytes(), len(head)

        success_before, fail_before = _stats(server, "gated_pid")
        first = connect(server.http_url)
        first.sendall(raw_request("/v2/models/gated_pid/infer", *gated_body({"started": str(started),
                                                                              "release": str(release)})))
        try:
            wait_until(started.exists)
            queued = [tmp_path / f"queued{i}" for i in range(3)]
            with connect(server.http_url) as sock:
                sock.sendall(b"".join(raw_request("/v2/models/gated_pid/infer", *gated_body({"started": str(q)}))
                                      for q in queued))
                wait_until(lambda: _pending(server) == 1)
            wait_until(lambda: _stats(server, "gated_pid")[1] == fail_before + 1)
        finally:
            release.touch()
        answer = Answer(*read_response(first, bytearray()))
        first.close()
        assert answer.status == 200
        assert not any(q.exists() for q in queued)
        with connect(server.http_url) as sock:
            sock.sendall(raw_request("/v2/models/gated_pid/infer", *gated_body({})))
            assert read_response(sock, bytearray())[0] == 200
        assert _stats(server, "gated_pid") == (success_before + 2, fail_before + 1)


def _pending(server) -> float:
    with urllib.request.urlopen(server.metrics_url, timeout=TIMEOUT_S) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("nv_inference_pending_request_count{"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_expect_continue_and_chunked_bodies_on_the_callback_route(servers):
    """`Expect: 100-continue` after answers from the callback route (nothing ahead: "100 Continue" comes), and
    chunked bodies, small and large, answered as Content-Length ones."""
    server = servers["add_sub"]
    with connect(server.http_url) as sock:
        buffer = bytearray()
        for value in (1, 2, 3):
            body, length = _add_sub(value)
            sock.sendall(raw_request(PATH, body, length))
            assert _output0(Answer(*read_response(sock, buffer))) == [value + 1000] * 16
            wire = raw_request(PATH, body, length, extra=b"Expect: 100-continue\r\n")
            head_end = wire.index(b"\r\n\r\n") + 4
            sock.sendall(wire[:head_end])
            while b"\r\n\r\n" not in buffer:
                buffer += sock.recv(65536)
            assert bytes(buffer).startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), bytes(buffer)
            del buffer[: len(b"HTTP/1.1 100 Continue\r\n\r\n")]
            sock.sendall(wire[head_end:])
            assert _output0(Answer(*read_response(sock, buffer))) == [value + 1000] * 16
    server = servers["identity"]
    for size in (100, 300_000):
        data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        head = header([("IN_X", "UINT8", [size], size)], binary_outputs=["OUT_X"])
        body = head + data
        pieces = [body[i:i + 7000] for i in range(0, len(body), 7000)]
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
        wire = (b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                b"Inference-Header-Content-Length: %d\r\n\r\n" % len(head)) + chunks + b"0\r\n\r\n"
        with connect(server.http_url) as sock:
            sock.sendall(wire * 3)
            buffer = bytearray()
            for _ in range(3):
                answer = Answer(*read_response(sock, buffer))
                assert answer.status == 200 and answer.binary == data


def test_clients_leaving_give_back_their_memory(tmp_path):
    """With a 2 MiB body budget, 12 rounds of: a gated request holds the one instance; another client pipelines
    three 300 KB requests (the first queued for the instance, the rest read) and leaves; a third leaves mid-body.
    Were a body's charge kept, the budget would run out and the last requests would never be read."""
    gated = tensor_args("input", [("INPUT", "fp32", "-1")]) + tensor_args("output", [("PID", "int64", "1")])
    with serve("tests.models:gated_pid", *gated, "--http-max-buffered-bytes", str(2 << 20),
               env={"PYTRITON_PIPELINE_DEPTH": "1"}) as server:

        def gated_body(parameters: dict, count: int = 4) -> tuple[bytes, int]:
            head = header([("INPUT", "FP32", [count], 4 * count)], parameters=parameters)
            return head + np.ones(count, dtype=np.float32).tobytes(), len(head)

        success_before, fail_before = _stats(server, "gated_pid")
        big = gated_body({}, 75_000)
        for round_ in range(12):
            started, release = tmp_path / f"started{round_}", tmp_path / f"release{round_}"
            first = connect(server.http_url)
            first.sendall(raw_request("/v2/models/gated_pid/infer",
                                      *gated_body({"started": str(started), "release": str(release)})))
            try:
                wait_until(started.exists)
                with connect(server.http_url) as sock:
                    sock.sendall(raw_request("/v2/models/gated_pid/infer", *big) * 3)
                    wait_until(lambda: _pending(server) == 1)
                with connect(server.http_url) as sock:
                    wire = raw_request("/v2/models/gated_pid/infer", *big)
                    sock.sendall(wire[: len(wire) // 2])
                wait_until(lambda: _stats(server, "gated_pid")[1] == fail_before + round_ + 1)
            finally:
                release.touch()
            assert read_response(first, bytearray())[0] == 200
            first.close()
        with connect(server.http_url) as sock:
            sock.sendall(raw_request("/v2/models/gated_pid/infer", *big) * 8)
            buffer = bytearray()
            assert [read_response(sock, buffer)[0] for _ in range(8)] == [200] * 8
        assert _stats(server, "gated_pid") == (success_before + 12 + 8, fail_before + 12)


@pytest.mark.parametrize("bad, status", [
    (b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    (b"NOT HTTP AT ALL\r\n\r\n", 400),
    (b"POST /v2/models/add_sub/infer HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(101)) + b"\r\n", 431),
])
def test_a_refusal_behind_callback_answers(servers, bad, status):
    """Requests the callback route answers, then one the connection refuses, in one write: the answers first, in
    order, then the refusal, then the connection closes."""
    server = servers["add_sub"]
    with connect(server.http_url) as sock:
        sock.sendall(raw_request(PATH, *_add_sub(1)) + raw_request(PATH, *_add_sub(2), gzip_answer=True)
                     + raw_request(PATH, *_add_sub(3)) + bad + raw_request(PATH, *_add_sub(4)))
        buffer = bytearray()
        for value in (1, 2, 3):
            assert _output0(Answer(*read_response(sock, buffer))) == [value + 1000] * 16
        got, headers, _ = read_response(sock, buffer)
        assert (got, headers.get("connection")) == (status, "close")
        tail = bytes(buffer)
        while chunk := sock.recv(65536):
            tail += chunk
        assert tail == b""


def test_a_graceful_stop_answers_the_callback_request_in_flight(tmp_path):
    """SIGTERM while a callback-route request runs (a second pipelined behind it): the running one is answered
    (200) once released, the one behind it gets Triton's 'Server not ready' or the connection ends; nothing is
    left in /dev/shm (the session's check) and the server exits 0."""
    gated = tensor_args("input", [("INPUT", "fp32", "-1")]) + tensor_args("output", [("PID", "int64", "1")])
    server = ServerProcess(["tests.models:gated_pid", *gated])
    started, release = tmp_path / "started", tmp_path / "release"
    try:
        head = header([("INPUT", "FP32", [4], 16)], parameters={"started": str(started), "release": str(release)})
        body = head + np.zeros(4, dtype=np.float32).tobytes()
        sock = connect(server.http_url)
        sock.sendall(raw_request("/v2/models/gated_pid/infer", body, len(head)) * 2)
        wait_until(started.exists)
        os.kill(server.process.pid, signal.SIGTERM)

        def stopping() -> bool:  # (the server says it is not ready once it drains)
            with connect(server.http_url) as probe:
                probe.sendall(_get("/v2/health/ready"))
                return read_response(probe, bytearray())[0] != 200

        wait_until(stopping)
        release.touch()
        buffer = bytearray()
        status, _, _ = read_response(sock, buffer)
        assert status == 200
        rest = bytes(buffer)
        while chunk := sock.recv(65536):
            rest += chunk
        assert rest == b"" or rest.startswith(b"HTTP/1.1 503"), rest[:200]
        sock.close()
    finally:
        release.touch()
        assert server.stop() == 0, server.log


def test_a_request_running_past_the_idle_timeout_is_answered(tmp_path):
    """`--http-idle-timeout 1`: a callback-route (and a coroutine-route) request runs longer than that (gated until
    a connection opened after it has been closed as idle): it is answered, its connection not closed as idle."""
    gated = tensor_args("input", [("INPUT", "fp32", "-1")]) + tensor_args("output", [("PID", "int64", "1")])
    with serve("tests.models:gated_pid", *gated, "--http-idle-timeout", "1") as server:
        for gzip_answer in (False, True):
            started, release = tmp_path / f"started{gzip_answer}", tmp_path / f"release{gzip_answer}"
            head = header([("INPUT", "FP32", [4], 16)], parameters={"started": str(started),
                                                                   "release": str(release)})
            body = head + np.zeros(4, dtype=np.float32).tobytes()
            with connect(server.http_url) as sock:
                sock.sendall(raw_request("/v2/models/gated_pid/infer", body, len(head), gzip_answer))
                try:
                    wait_until(started.exists)
                    with connect(server.http_url) as idle:
                        assert idle.recv(1) == b""  # closed as idle (after 1 s; the socket's timeout is 30 s)
                finally:
                    release.touch()
                answer = Answer(*read_response(sock, bytearray()))
                assert answer.status == 200
                sock.sendall(raw_request("/v2/models/gated_pid/infer", body, len(head), gzip_answer))
                assert Answer(*read_response(sock, bytearray())).status == 200


def test_a_client_leaving_a_running_request_counts_as_triton_on_both_routes(tmp_path):
    """A client closes its connection while the model runs its request (a binary request on the callback route,
    then with gzip asked for on the coroutine route): once the model answers, a success, as Triton 2.51 counts it."""
    gated = tensor_args("input", [("INPUT", "fp32", "-1")]) + tensor_args("output", [("PID", "int64", "1")])
    with serve("tests.models:gated_pid", *gated) as server:
        for index, gzip_answer in enumerate((False, False, True)):
            started, release = tmp_path / f"started{index}", tmp_path / f"release{index}"
            head = header([("INPUT", "FP32", [4], 16)], parameters={"started": str(started),
                                                                   "release": str(release)})
            success_before, fail_before = _stats(server, "gated_pid")
            try:
                with connect(server.http_url) as sock:
                    sock.sendall(raw_request("/v2/models/gated_pid/infer", head + bytes(16), len(head), gzip_answer))
                    wait_until(started.exists)
            finally:
                release.touch()
            wait_until(lambda: _stats(server, "gated_pid") != (success_before, fail_before))
            assert _stats(server, "gated_pid") == (success_before + 1, fail_before), index


def test_a_mixed_pipeline_over_tls(tmp_path):
    """HTTPS: one TLS write of callback-route requests, coroutine-route ones and a refused one, then a large body
    (received through the TLS layer in many pieces): answered in order."""
    certs = make_certs(tmp_path)
    args = ["--http-use-ssl", "--http-server-cert", certs.server_pem, "--http-server-key", certs.server_key]
    with serve("tests.models:identity", *SERVERS["identity"][1], *args) as server:
        context = ssl.create_default_context(cafile=certs.ca_pem)
        host, port = server.http_url.rsplit(":", 1)
        path = "/v2/models/identity/infer"
        datas = [bytes([value]) * size for value, size in ((1, 10), (2, 300), (3, 5), (4, 400_000), (5, 7))]
        wire, expected = b"", []
        for index, data in enumerate(datas):
            head = header([("IN_X", "UINT8", [len(data)], len(data))], binary_outputs=["OUT_X"])
            wire += raw_request(path, head + data, len(head), gzip_answer=index % 2 == 1)
            expected.append((200, data))
            if index == 2:
                wire += raw_request(path, head + data[:-1], len(head))
                expected.append((400, b""))
        with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as raw:
            with context.wrap_socket(raw, server_hostname=host) as sock:
                for _ in range(2):
                    sock.sendall(wire)
                    buffer = bytearray()
                    for status, data in expected:
                        answer = Answer(*read_response(sock, buffer))
                        assert (answer.status, answer.binary) == (status, data)
