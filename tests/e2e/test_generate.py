"""Triton's generate extension (`POST /v2/models/<m>/generate`, `/generate_stream`) through real clients: `requests`
reading the server-sent events, tritonclient.grpc on the same models; a client that leaves cancels the request inside
the model; errors in Triton's words and statuses. The models are tests/repositories/generate (Python backend), and
the slow test at the end sends the same requests to the real tritonserver 2.51 and compares every answer."""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient

from tests._support.model_calls import DECOUPLED_COUNT
from tests._support.paths import REPOSITORIES
from tests._support.rss import rss_bytes
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, real_tritonserver
from tests._support.serving import serve
from tests._support.waits import wait_for_file

REPOSITORY = REPOSITORIES / "generate"
SERVE_ARGS = ("tests.models:countdown", "--model-name", "countdown", *DECOUPLED_COUNT, "--model-repository",
              str(REPOSITORY))
EXACTLY_ONE = ("generate expects model to produce exactly 1 response, use generate stream for model that generates "
               "various number of responses")


@pytest.fixture(scope="module")
def server():
    with serve(*SERVE_ARGS) as s:
        yield s


def url(server, model: str, route: str = "generate") -> str:
    return f"http://{server.http_url}/v2/models/{model}/{route}"


def events(response: requests.Response) -> list[dict[str, Any]]:
    """The JSON of each `data:` event of an SSE answer (the framing checked on the way)."""
    out = []
    for block in response.text.split("\n\n")[:-1]:
        assert block.startswith("data: "), block
        out.append(json.loads(block[len("data: "):]))
    assert response.text.endswith("\n\n") or not response.text
    return out


def test_generate_maps_keys_to_inputs_and_parameters_and_flattens_outputs(server):
    answer = requests.post(url(server, "gen_echo"), json={
        "id": "42", "text_input": "hi", "scale": [1, 2, 3, 4], "parameters": {"temperature": 0.5, "stream": False},
        "extra": 7}, timeout=30)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.text == json.dumps({
        "id": "42", "model_name": "gen_echo", "model_version": "1",
        "params": json.dumps({"extra": 7, "id": "42", "stream": False, "temperature": 0.5}, sort_keys=True),
        "scaled": [2.0, 4.0, 6.0, 8.0], "shape": [2, 2], "text_output": "echo: hi"}, separators=(",", ":"))


def test_generate_stream_sends_one_event_per_response_of_a_decoupled_model(server):
    with requests.post(url(server, "gen_stream", "generate_stream"), json={"id": "9", "text_input": "t", "n": 3},
                       stream=True, timeout=30) as answer:
        assert answer.status_code == 200
        assert answer.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        assert answer.headers["Transfer-Encoding"] == "chunked"
        got = events(answer)
    assert got == [{"id": "9", "model_name": "gen_stream", "model_version": "1", "text_output": f"t {i}"}
                   for i in range(3)]


def test_the_same_model_over_grpc_streams_the_same_responses(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        text = grpcclient.InferInput("text_input", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"t"], dtype=np.object_))
        n = grpcclient.InferInput("n", [1], "INT32")
        n.set_data_from_numpy(np.array([3], dtype=np.int32))
        client.async_stream_infer("gen_stream", [text, n], request_id="9", enable_empty_final_response=True)
        got = []
        while True:
            result, error = results.get(timeout=30)
            assert error is None, error
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
            got.append(result.as_numpy("text_output")[0].decode())
    finally:
        client.stop_stream()
    sse = requests.post(url(server, "gen_stream", "generate_stream"), json={"text_input": "t", "n": 3}, timeout=30)
    assert got == [e["text_output"] for e in events(sse)] == ["t 0", "t 1", "t 2"]


def test_a_callable_model_streams_over_generate_stream(server):
    answer = requests.post(url(server, "countdown", "generate_stream"), json={"COUNT": 3}, timeout=30)
    assert [e["VALUE"] for e in events(answer)] == [2, 1, 0]


@pytest.mark.parametrize(("n", "status", "body"), [
    (1, 200, {"model_name": "gen_stream", "model_version": "1", "text_output": "t 0"}),
    (3, 200, {"error": EXACTLY_ONE}),
    (0, 200, {"error": EXACTLY_ONE}),
])
def test_generate_wants_exactly_one_response(server, n, status, body):
    answer = requests.post(url(server, "gen_stream"), json={"text_input": "t", "n": n}, timeout=30)
    assert (answer.status_code, answer.json()) == (status, body)


def test_a_stream_without_responses_is_an_empty_event_stream(server):
    answer = requests.post(url(server, "gen_stream", "generate_stream"), json={"text_input": "t", "n": 0},
                           timeout=30)
    assert (answer.status_code, answer.headers["Content-Type"], answer.text) == (
        200, "text/event-stream; charset=utf-8", "")


def test_errors_before_and_during_the_stream(server):
    # refused before the model ran: an HTTP error, JSON
    answer = requests.post(url(server, "gen_stream", "generate_stream"), json={"text_input": "t"}, timeout=30)
    assert (answer.status_code, answer.headers["Content-Type"]) == (400, "application/json")
    assert answer.json() == {"error": "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model "
                                      "'gen_stream'. Got input(s) ['text_input'], but missing required input(s) "
                                      "['n']. Please provide all required input(s)."}
    # the model's first response is an error: its status, as the one event
    answer = requests.post(url(server, "gen_stream", "generate_stream"),
                           json={"text_input": "t", "n": 3, "fail_at": 0}, timeout=30)
    assert (answer.status_code, answer.text) == (400, 'data: {"error":"gen_stream failed at 0"}\n\n')
    # a later error: an error event after the responses, status 200
    answer = requests.post(url(server, "gen_stream", "generate_stream"),
                           json={"text_input": "t", "n": 3, "fail_at": 2}, timeout=30)
    assert answer.status_code == 200
    assert events(answer) == [{"model_name": "gen_stream", "model_version": "1", "text_output": "t 0"},
                              {"model_name": "gen_stream", "model_version": "1", "text_output": "t 1"},
                              {"error": "gen_stream failed at 2"}]


@pytest.mark.parametrize(("body", "status", "error"), [
    (b"{", 500, None),
    (b"", 500, "failed to parse the request JSON buffer: The document is empty. at 0"),
    (b"[1]", 500, "attempt to get members for non-object"),
    (b'{"text_input": "a", "parameters": 5}', 500,
     "Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object"),
    (b'{"text_input": "a", "x": [1, 2]}', 400,
     "parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'."),
    (b'{"text_input": ["a", "b"]}', 400, "The schema can not convert input 'text_input' to tensor with proper shape"),
    (b'{"text_input": "a", "scale": [1, 2, 3]}', 400,
     "The schema can not convert input 'scale' to tensor with proper shape"),
    (b'{"text_input": 5}', 500, "Unable to parse JSON bytes array: attempt to access JSON non-string as string"),
    (b'{"text_input": "a", "id": 5}', 500, "Unable to parse 'id': attempt to access JSON non-string as string"),
    (b'{"text_input": "a", "parameters": {"text_input": "b"}}', 400,
     "Converting keyword: 'parameters': [request id: <id_unknown>] input 'text_input' already exists in request"),
    (b'{"text_input": "a", "fail": true}', 400, "gen_echo was asked to fail"),
])
def test_bad_requests_get_tritons_status_and_words(server, body, status, error):
    answer = requests.post(url(server, "gen_echo"), data=body, timeout=30)
    assert answer.status_code == status
    assert answer.headers["Content-Type"] == "application/json"
    if error is None:
        assert answer.json()["error"].startswith("failed to parse the request JSON buffer: ")
    else:
        assert answer.json() == {"error": error}


def test_unknown_models_methods_encodings_and_large_bodies(server):
    for route in ("generate", "generate_stream"):
        answer = requests.post(url(server, "nope", route), json={"text_input": "a"}, timeout=30)
        assert (answer.status_code, answer.json()) == (404, {"error": "Request for unknown model: 'nope' is not found"})
    answer = requests.post(f"http://{server.http_url}/v2/models/gen_echo/versions/7/generate", json={}, timeout=30)
    assert (answer.status_code, answer.json()) == (
        404, {"error": "Request for unknown model: 'gen_echo' version 7 is not found"})
    answer = requests.get(url(server, "gen_echo"), timeout=30)
    assert (answer.status_code, answer.json()) == (405, {"error": "Method Not Allowed"})
    answer = requests.post(url(server, "gen_echo"), data=b"x", headers={"Content-Encoding": "gzip"}, timeout=30)
    assert (answer.status_code, answer.json()) == (
        400, {"error": "Unsupported content-encoding, only 'identity' is supported."})
    big = b'{"text_input": "' + b"a" * (64 * 1024 * 1024) + b'"}'
    answer = requests.post(url(server, "gen_echo"), data=big, timeout=60)
    assert answer.status_code == 413
    assert answer.json()["error"].startswith(f"request size of {len(big)} bytes exceeds the maximum allowed input size")
    assert requests.post(url(server, "gen_echo"), json={"text_input": "a"}, timeout=30).status_code == 200


def test_a_client_that_leaves_the_stream_cancels_the_request_in_the_model(server, tmp_path):
    marker, started = tmp_path / "cancelled", tmp_path / "started"
    with requests.post(url(server, "gen_stream", "generate_stream"), stream=True, timeout=30,
                       json={"text_input": "t", "n": 1, "marker": str(marker), "started": str(started)}) as answer:
        lines = answer.iter_lines()
        assert json.loads(next(lines)[len(b"data: "):])["text_output"] == "t 0"
        wait_for_file(started)
    # (the connection is closed: the model, looping on is_cancelled(), sees True)
    wait_for_file(marker)
    assert marker.read_text() == "cancelled"
    # its one instance is free again: the next request is answered
    answer = requests.post(url(server, "gen_stream"), json={"text_input": "u", "n": 1}, timeout=30)
    assert answer.json()["text_output"] == "u 0"


@pytest.mark.parametrize("route", ["generate", "generate_stream"])
def test_a_client_that_leaves_before_the_first_response_cancels_the_request(server, tmp_path, route):
    marker, started = tmp_path / "cancelled", tmp_path / "started"
    body = json.dumps({"text_input": "t", "n": 1, "silent": True, "marker": str(marker),
                       "started": str(started)}).encode()
    with socket.create_connection(("127.0.0.1", int(server.http_url.rsplit(":", 1)[1]))) as sock:
        sock.sendall(b"POST /v2/models/gen_stream/%b HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%b"
                     % (route.encode(), len(body), body))
        wait_for_file(started)  # (the model runs and has answered nothing yet)
    wait_for_file(marker)
    assert marker.read_text() == "cancelled"


def test_a_client_that_never_reads_is_dropped_and_its_request_cancelled(tmp_path):
    """A client that asks for an endless stream and reads nothing: the server takes no more responses than the
    connection can hold (WRITE_HIGH past the socket's buffers), drops the client after the body timeout without
    progress, and the model hears the cancellation."""
    marker = tmp_path / "cancelled"
    with serve(*SERVE_ARGS, "--http-body-timeout", "1") as server:
        body = json.dumps({"text_input": "x" * 1000, "n": 1, "flood": str(marker)}).encode()
        with socket.create_connection(("127.0.0.1", int(server.http_url.rsplit(":", 1)[1]))) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"POST /v2/models/gen_stream/generate_stream HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
            wait_for_file(marker)  # (never read: the server dropped us and cancelled the request)
        assert marker.read_text() == "cancelled"
        answer = requests.post(url(server, "gen_stream"), json={"text_input": "u", "n": 1}, timeout=30)
        assert answer.json()["text_output"] == "u 0"


@pytest.mark.slow
def test_an_endless_stream_nobody_reads_holds_bounded_server_memory():
    """200,000 responses asked for on a connection that reads nothing: the server takes a response from the model only
    as the client takes the last (WRITE_HIGH unsent at most), the model is held back by the stream's window; the
    server's memory stays put while the model could have produced all of it (as for an unread gRPC stream)."""
    with serve(*SERVE_ARGS) as server:
        pid = server.process.pid
        before = rss_bytes(pid)
        body = json.dumps({"COUNT": 200_000}).encode()
        with socket.create_connection(("127.0.0.1", int(server.http_url.rsplit(":", 1)[1]))) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"POST /v2/models/countdown/generate_stream HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
            growth = 0
            for _ in range(5):  # (a measurement: an unbounded server grows all along, whatever the moments)
                time.sleep(1)
                growth = max(growth, rss_bytes(pid) - before)
        assert growth < 32 << 20, f"server RSS grew by {growth >> 20} MiB for one stream nobody reads"
        answer = requests.post(url(server, "countdown", "generate_stream"), json={"COUNT": 2}, timeout=60)
        assert [e["VALUE"] for e in events(answer)] == [1, 0]


# ---- the same requests on the real tritonserver 2.51 ------------------------------------------
PROBE = Path(__file__).with_name("generate_probe.py")


def _probe(port: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(PROBE), str(port)], capture_output=True, text=True, timeout=300,
                          check=True)
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_same_requests_answer_as_on_the_real_tritonserver(server):
    """Every case of generate_probe.py (status, content type, body) on both servers; the framing of `generate`'s
    answers is the one difference (Triton sends them chunked, we with a Content-Length)."""
    ours = _probe(int(server.http_url.rsplit(":", 1)[1]))
    log: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        urls: dict[str, str] = {}
        with real_tritonserver(REPOSITORY, Path(scratch), log=log, urls=urls):
            theirs = _probe(int(urls["http"].rsplit(":", 1)[1]))
    assert ours.keys() == theirs.keys()
    for case in theirs:
        for answer in (ours[case], theirs[case]):
            answer.pop("framing")
            if case == "echo_bad_json":
                answer["body"] = "(a JSON parse error)"  # (RapidJSON's words for where it stopped are not ours)
        assert ours[case] == theirs[case], case
