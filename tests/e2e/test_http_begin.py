"""The HTTP infer route answered from its call's callback (`frontend/http/infer_begin.py`), plain and with a gzip
answer (the same path since issue 37): the same answers and messages, a kept JSON header still checked against every
body, statistics counted alike, and a request whose client leaves while it waits withdrawn (a CANCELED failure) with
the server answering on."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import urllib.request

import numpy as np
import orjson
import pytest

from tests._support.http_raw import read_response
from tests._support.serving import lazy_servers, serve, tensor_args
from tests._support.waits import holds_within

TIMEOUT_S = 30
SERVERS = {
    "add_sub": (
        "tests.models:add_sub",
        ["--max-batch-size", "8"]
        + tensor_args("input", [("INPUT0", "int32", "16"), ("INPUT1", "int32", "16")])
        + tensor_args("output", [("OUTPUT0", "int32", "16"), ("OUTPUT1", "int32", "16")]),
    ),
    "restricted": (
        "tests.models:add_sub",
        ["--max-batch-size", "8", "--http-restricted-api", "inference:infer-token=abc"]
        + tensor_args("input", [("INPUT0", "int32", "16"), ("INPUT1", "int32", "16")])
        + tensor_args("output", [("OUTPUT0", "int32", "16"), ("OUTPUT1", "int32", "16")]),
    ),
}
GATED = tensor_args("input", [("INPUT", "fp32", "-1")]) + tensor_args("output", [("PID", "int64", "1")])


@pytest.fixture(scope="module")
def servers():
    yield from lazy_servers(SERVERS)


@pytest.fixture(scope="module")
def gated_server():
    # no pipelining: a second request waits in the queue (visible as pending) while the first executes
    with serve("tests.models:gated_pid", *GATED, env={"PYTRITON_PIPELINE_DEPTH": "1"}) as server:
        yield server


def binary_body(sizes=(64, 64), shape=(1, 16), data: bytes | None = None, parameters: dict | None = None,
                model_inputs=("INPUT0", "INPUT1")) -> tuple[bytes, int]:  # fmt: skip
    head: dict = {"inputs": [
        {"name": name, "datatype": "INT32", "shape": list(shape), "parameters": {"binary_data_size": size}}
        for name, size in zip(model_inputs, sizes)
    ], "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
    if parameters:
        head["parameters"] = parameters
    header = orjson.dumps(head)
    if data is None:
        data = b"".join(np.full(size // 4, i + 1, dtype=np.int32).tobytes() for i, size in enumerate(sizes))
    return header + data, len(header)


def post(conn: http.client.HTTPConnection, path: str, body: bytes, header_length: int, gzip_answer: bool = False,
         extra: dict | None = None):
    headers = {"Inference-Header-Content-Length": str(header_length), "Content-Type": "application/octet-stream",
               **(extra or {})}
    if gzip_answer:
        headers["Accept-Encoding"] = "gzip"
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    if response.getheader("Content-Encoding") == "gzip":
        data = gzip.decompress(data)
    return response.status, response.getheader("Inference-Header-Content-Length"), data


def success_count(server, model: str) -> tuple[int, int]:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{model}/stats", timeout=TIMEOUT_S) as answer:
        stats = json.loads(answer.read())["model_stats"][0]["inference_stats"]
    return stats["success"]["count"], stats["fail"]["count"]


def test_infer_route_answers_plain_and_compressed_alike(servers):
    server = servers["add_sub"]
    conn = http.client.HTTPConnection(server.http_url, timeout=TIMEOUT_S)
    try:
        before = success_count(server, "add_sub")
        good, length = binary_body()
        for path in ("/v2/models/add_sub/infer", "/v2/models/add_sub/versions/1/infer", "/v2/models/add%5Fsub/infer"):
            answers = [post(conn, path, good, length, gzip_answer) for gzip_answer in (False, True, False)]
            assert answers[0] == answers[1] == answers[2]
            status, json_length, data = answers[0]
            assert status == 200, data
            output = np.frombuffer(data[int(json_length):], dtype=np.int32)
            assert output.tolist() == [3] * 16  # OUTPUT0 = INPUT0 + INPUT1
        assert success_count(server, "add_sub") == (before[0] + 9, before[1])
        # one kept header, bodies of other sizes: refused with Triton's status and message
        cases = [
            (good[:-4], 400, "unexpected size for input 'INPUT1', expecting 4 additional bytes for model 'add_sub'"),
            (good + b"\x00" * 4, 400, "unexpected additional input data for model 'add_sub'"),
            (good[:length], 400, "unexpected size for input 'INPUT0', expecting 64 additional bytes for model "
                                 "'add_sub'"),
        ]
        for body, status, message in cases:
            for gzip_answer in (False, True):
                got_status, _, data = post(conn, "/v2/models/add_sub/infer", body, length, gzip_answer)
                assert (got_status, json.loads(data)) == (status, {"error": message})
            assert post(conn, "/v2/models/add_sub/infer", good, length)[0] == 200  # the header is still good
        # a header the model refuses (wrong sizes for its shape): refused every time, never remembered as passed
        wrong, wrong_length = binary_body(sizes=(60, 60), shape=(1, 15))
        for gzip_answer in (False, True, False, False):
            got_status, _, data = post(conn, "/v2/models/add_sub/infer", wrong, wrong_length, gzip_answer)
            assert got_status == 400 and "unexpected shape for input 'INPUT0'" in json.loads(data)["error"]
        mismatch, mismatch_length = binary_body(sizes=(60, 64))  # shape [1,16] but 60 bytes
        for gzip_answer in (False, True, False):
            got_status, _, data = post(conn, "/v2/models/add_sub/infer", mismatch, mismatch_length, gzip_answer)
            assert (got_status, json.loads(data)) == (400, {"error": "[request id: <id_unknown>] input byte size "
                                                                     "mismatch for input 'INPUT0' for model "
                                                                     "'add_sub'. Expected 64, got 60"})
        # an unknown model and a wrong method
        unknown = [post(conn, "/v2/models/nope/infer", good, length, gzip_answer) for gzip_answer in (False, True)]
        assert unknown[0] == unknown[1] and unknown[0][0] == 404
        conn.request("GET", "/v2/models/add_sub/infer")
        response = conn.getresponse()
        assert response.status == 405 and response.read()
    finally:
        conn.close()


def test_restricted_inference_on_the_callback_route(servers):
    server = servers["restricted"]
    conn = http.client.HTTPConnection(server.http_url, timeout=TIMEOUT_S)
    try:
        good, length = binary_body()
        for token, status in (({}, 403), ({"infer-token": "wrong"}, 403), ({"infer-token": "abc"}, 200)):
            answers = [post(conn, "/v2/models/add_sub/infer", good, length, gzip_answer, token)
                       for gzip_answer in (False, True)]
            assert answers[0] == answers[1] and answers[0][0] == status, answers
            if status == 403:
                assert json.loads(answers[0][2]) == {"error": "This API is restricted, expecting header 'infer-token'"}
    finally:
        conn.close()


def test_keep_alive_pipelined_callback_answers_in_order(servers):
    server = servers["add_sub"]
    bodies = []
    for value in range(1, 9):
        data = np.full(16, value, dtype=np.int32).tobytes() + np.full(16, 100, dtype=np.int32).tobytes()
        bodies.append(binary_body(data=data))
    host, port = server.http_url.split(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        wire = b"".join(
            b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: %d\r\n"
            b"Content-Length: %d\r\n\r\n" % (length, len(body)) + body
            for body, length in bodies
        )
        sock.sendall(wire)
        buffer = bytearray()
        for value in range(1, 9):
            status, headers, data = read_response(sock, buffer)
            assert status == 200
            json_length = int(headers["inference-header-content-length"])
            assert np.frombuffer(data[json_length:], dtype=np.int32).tolist() == [value + 100] * 16


def _pending(server) -> float:
    """The server's nv_inference_pending_request_count (requests queued for an instance)."""
    with urllib.request.urlopen(server.metrics_url, timeout=TIMEOUT_S) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("nv_inference_pending_request_count{"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_client_leaving_a_queued_callback_request_withdraws_it(gated_server, tmp_path):
    """The one instance runs a gated request; a second waits in the queue; its client closes the connection: the
    request is withdrawn (never runs; counted as a failure, as Triton counts a cancelled request) and the server
    answers on."""
    server = gated_server
    started, release = tmp_path / "started", tmp_path / "release"
    _, fails_before = success_count(server, "gated_pid")

    def gated_body(parameters: dict) -> tuple[bytes, int]:
        header = orjson.dumps({"inputs": [{"name": "INPUT", "datatype": "FP32", "shape": [4],
                                           "parameters": {"binary_data_size": 16}}], "parameters": parameters})
        return header + np.zeros(4, dtype=np.float32).tobytes(), len(header)

    first = http.client.HTTPConnection(server.http_url, timeout=TIMEOUT_S)
    body, length = gated_body({"started": str(started), "release": str(release)})
    first.request("POST", "/v2/models/gated_pid/infer", body=body,
                  headers={"Inference-Header-Content-Length": str(length)})
    try:
        assert holds_within(started.exists)
        queued_started = tmp_path / "queued.started"
        host, port = server.http_url.split(":")
        body, length = gated_body({"started": str(queued_started)})
        with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
            sock.sendall(b"POST /v2/models/gated_pid/infer HTTP/1.1\r\nHost: x\r\n"
                         b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (length, len(body))
                         + body)
            assert holds_within(lambda: _pending(server) == 1)  # it waits for the (only) instance
        assert holds_within(lambda: success_count(server, "gated_pid")[1] == fails_before + 1)
    finally:
        release.touch()
    response = first.getresponse()
    assert response.status == 200 and response.read()
    first.close()
    assert not queued_started.exists()  # the withdrawn request never ran
    # the server answers on, on a new connection
    conn = http.client.HTTPConnection(server.http_url, timeout=TIMEOUT_S)
    try:
        body, length = gated_body({})
        conn.request("POST", "/v2/models/gated_pid/infer", body=body,
                     headers={"Inference-Header-Content-Length": str(length)})
        assert conn.getresponse().status == 200
    finally:
        conn.close()
