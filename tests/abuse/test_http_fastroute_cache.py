"""Attacks on the HTTP callback route's kept JSON headers (`frontend/http/infer_cache.py`): the same header bytes
with other bodies, lying `Inference-Header-Content-Length`s, headers that differ only in their id or parameters,
bad BYTES behind a kept header, more headers than are kept, the same header to another model or version and to a
model loaded again with another config. Every answer is compared with the coroutine route's (forced with
`Accept-Encoding: gzip`), which parses each header in full."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm

from tests._support.serving import serve, tensor_args
from tests.abuse._fastroute import ask, both_routes, header
from tests.abuse._http import connect

ARGS = tensor_args("input", [("IN_X", "fp32", "-1"), ("IN_T", "bytes", "-1")]) + tensor_args(
    "output", [("OUT_X", "fp32", "-1"), ("OUT_T", "bytes", "-1")]
)
PATH = "/v2/models/identity/infer"


def _prefixed(*items: tuple[int, bytes]) -> bytes:
    return b"".join(struct.pack("<I", n) + data for n, data in items)


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:identity", *ARGS) as running:
        yield running


def _good(n: int = 4, **top) -> tuple[bytes, int, np.ndarray]:
    x = np.arange(n, dtype=np.float32)
    texts = _prefixed((2, b"ab"), (1, b"c"))
    head = header([("IN_X", "FP32", [n], 4 * n), ("IN_T", "BYTES", [2], len(texts))], **top)
    return head + x.tobytes() + texts, len(head), x


def test_a_kept_header_with_other_bodies_answers_as_a_fresh_parse(server):
    sock, buffer = connect(server.http_url), bytearray()
    with sock:
        body, length, x = _good()
        for _ in range(2):  # (the first keeps the header)
            answer = both_routes(sock, buffer, PATH, body, length)
            assert answer.status == 200, answer
        head, data = body[:length], body[length:]
        cases = {
            "short": head + data[:-1],
            "long": body + b"\0",
            "no binary": head,
            "x cut": head + data[:10],
            "bytes cut in a length": head + data[:16] + _prefixed((2, b"ab")) + b"\1\0",
        }
        for what, bad in cases.items():
            answer = both_routes(sock, buffer, PATH, bad, length)
            assert answer.status == 400, (what, answer)
            assert both_routes(sock, buffer, PATH, body, length).status == 200
        # the same total size, bad BYTES length prefixes behind the kept header
        same_size = {
            "a length past the end": _prefixed((1 << 31, b"ab"), (1, b"c")),
            "one element too few": _prefixed((6, b"ab\1\0\0\0")) + b"c",
            "one element too many": _prefixed((2, b"ab"), (0, b"")) + b"\0",
        }
        for what, texts in same_size.items():
            assert len(texts) == len(data) - 16, what
            answer = both_routes(sock, buffer, PATH, head + data[:16] + texts, length)
            assert answer.status == 400 and "IN_T" in answer.json["error"], (what, answer)
        # the x data with its bytes changed: answered with the new data
        y = np.full(4, 7, dtype=np.float32)
        answer = both_routes(sock, buffer, PATH, head + y.tobytes() + data[16:], length)
        assert answer.status == 200
        assert answer.json["outputs"][0]["data"] == [7.0] * 4


def test_lying_header_lengths(server):
    sock, buffer = connect(server.http_url), bytearray()
    with sock:
        body, length, _ = _good(id="ünïcode-id")
        assert both_routes(sock, buffer, PATH, body, length).status == 200
        utf8_at = body.index("ü".encode()) + 1  # inside the two bytes of 'ü'
        for lie in (0, -1, length + 1, len(body), len(body) + 1, length - 1, utf8_at, "abc", " 12x", 2**31, "+0"):
            answer = both_routes(sock, buffer, PATH, body, lie)
            assert answer.status == 400, (lie, answer)
        # the kept header is still good
        assert both_routes(sock, buffer, PATH, body, length).status == 200
        assert both_routes(sock, buffer, PATH, body, f"{length}abc").status == 200  # (std::stoi reads the digits)


def test_headers_differing_only_in_id_or_parameters(server):
    sock, buffer = connect(server.http_url), bytearray()
    with sock:
        answers = []
        for top in ({}, {"id": "one"}, {"id": "two"}, {"parameters": {"binary_data_output": True}},
                    {"parameters": {"binary_data_output": False}}, {"id": "one", "outputs": [{"name": "OUT_T"}]},
                    {"outputs": [{"name": "OUT_X", "parameters": {"binary_data": False}}]}):
            body, length, x = _good(**top)
            for _ in range(2):
                answer = both_routes(sock, buffer, PATH, body, length)
                assert answer.status == 200, (top, answer)
            answers.append(answer)
            assert answer.json.get("id", "") == top.get("id", ""), answer.json
            names = [o["name"] for o in answer.json["outputs"]]
            assert names == ([o["name"] for o in top["outputs"]] if "outputs" in top else ["OUT_X", "OUT_T"])
        assert "data" not in answers[3].json["outputs"][0] and "data" in answers[4].json["outputs"][0]
        assert answers[6].json["outputs"][0]["data"] == [0.0, 1.0, 2.0, 3.0]


def test_more_headers_than_kept(server):
    sock, buffer = connect(server.http_url), bytearray()
    with sock:
        kept = []
        for n in range(1, 300):  # (256 headers are kept)
            body, length, x = _good(n)
            answer = ask(sock, buffer, PATH, body, length)
            assert answer.status == 200, answer
            assert answer.json["outputs"][0]["data"] == x.tolist()
            kept.append((body, length))
        for n in (1, 2, 44, 45, 298, 299):
            body, length = kept[n - 1]
            assert both_routes(sock, buffer, PATH, body[:-1], length).status == 400
            assert both_routes(sock, buffer, PATH, body, length).status == 200


SCALE_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ {dims} ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ {dims} ] }} ]
"""

SCALE_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
                for r in requests]
"""


def _write(repo: Path, name: str, dims: str, versions=("1",)) -> None:
    for version in versions:
        (repo / name / version).mkdir(parents=True)
        (repo / name / version / "model.py").write_text(SCALE_MODEL)
    (repo / name / "config.pbtxt").write_text(SCALE_CONFIG.format(name=name, dims=dims))


def _x(n: int) -> tuple[bytes, int]:
    head = header([("X", "FP32", [n], 4 * n)])
    return head + np.arange(n, dtype=np.float32).tobytes(), len(head)


def test_the_same_header_to_another_model_version_or_config(tmp_path):
    """`scale` takes X [-1], `fixed` (same tensor names) X [4]: one header kept by `scale` is refused by `fixed`,
    and by `scale` once it is loaded again with X [4], with INT32, and after an unload and a load."""
    _write(tmp_path, "scale", "-1")
    _write(tmp_path, "fixed", "4", versions=("1", "2"))
    (tmp_path / "fixed" / "config.pbtxt").write_text(
        SCALE_CONFIG.format(name="fixed", dims="4") + "version_policy: { all: {} }\n")
    args = ["--model-repository", str(tmp_path), "--model-control-mode", "explicit", "--load-model", "scale",
            "--load-model", "fixed"]
    with serve(*args) as server:
        sock, buffer = connect(server.http_url), bytearray()
        client = httpclient.InferenceServerClient(server.http_url)
        with sock:
            three, three_length = _x(3)
            for _ in range(2):
                assert both_routes(sock, buffer, "/v2/models/scale/infer", three, three_length).status == 200
            for path in ("/v2/models/fixed/infer", "/v2/models/fixed/versions/1/infer",
                         "/v2/models/fixed/versions/2/infer", "/v2/models/scale/infer"):
                answer = both_routes(sock, buffer, path, three, three_length)
                if "scale" in path:
                    assert answer.status == 200
                else:
                    assert answer.status == 400 and "unexpected shape for input 'X' for model 'fixed'" in \
                        answer.json["error"], answer
            four, four_length = _x(4)
            for path in ("/v2/models/fixed/versions/2/infer", "/v2/models/fixed/versions/1/infer",
                         "/v2/models/scale/infer", "/v2/models/scale/versions/1/infer"):
                assert both_routes(sock, buffer, path, four, four_length).status == 200
            assert both_routes(sock, buffer, "/v2/models/fixed/versions/3/infer", four, four_length).status == 404

            def config(datatype: str, dims: list[int]) -> str:
                return json.dumps({"name": "scale", "backend": "python", "max_batch_size": 0,
                                   "input": [{"name": "X", "data_type": datatype, "dims": dims}],
                                   "output": [{"name": "Y", "data_type": datatype, "dims": dims}]})

            client.load_model("scale", config=config("TYPE_FP32", [4]))
            answer = both_routes(sock, buffer, "/v2/models/scale/infer", three, three_length)
            assert answer.status == 400 and "unexpected shape for input 'X' for model 'scale'" in answer.json["error"]
            assert both_routes(sock, buffer, "/v2/models/scale/infer", four, four_length).status == 200
            client.load_model("scale", config=config("TYPE_INT32", [4]))
            answer = both_routes(sock, buffer, "/v2/models/scale/infer", four, four_length)
            assert answer.status == 400 and "data-type is 'FP32', but model 'scale' expects 'INT32'" in \
                answer.json["error"]
            client.unload_model("scale")
            answer = both_routes(sock, buffer, "/v2/models/scale/infer", four, four_length)
            assert answer.status in (400, 404, 503), answer
            client.load_model("scale", config=config("TYPE_FP32", [3]))
            assert both_routes(sock, buffer, "/v2/models/scale/infer", four, four_length).status == 400
            assert both_routes(sock, buffer, "/v2/models/scale/infer", three, three_length).status == 200
        client.close()


def test_forwarded_headers_do_not_stick_to_a_kept_header():
    """Forwarded HTTP headers join each request's parameters: one request's never reach the next with the same
    JSON header (kept), nor its parameters the kept header."""
    args = ["--http-header-forward-pattern", "^x-fw", *tensor_args("input", [("IN", "int32", "1")]),
            *tensor_args("output", [("PARAMS", "bytes", "1")])]
    with serve("tests.models:echo_parameters", *args) as server:
        sock, buffer = connect(server.http_url), bytearray()
        with sock:
            for top in ({}, {"parameters": {"p": 1}}):
                head = header([("IN", "INT32", [1], 4)], **top)
                body = head + b"\1\0\0\0"
                seen = []
                for extra in (b"", b"x-fw-a: one\r\n", b"x-fw-b: two\r\n", b"", b"x-fw-a: three\r\nx-fw-b: 4\r\n", b""):
                    answer = both_routes(sock, buffer, "/v2/models/echo_parameters/infer", body, len(head), extra)
                    assert answer.status == 200, answer
                    seen.append(answer.json["outputs"][0]["data"][0])
                p = "p=1" if top else ""
                joined = (lambda *items: ";".join(i for i in items if i))
                assert seen == [joined(p), joined(p, "x-fw-a='one'"), joined(p, "x-fw-b='two'"), joined(p),
                                joined(p, "x-fw-a='three'", "x-fw-b='4'"), joined(p)], seen


def test_shared_memory_requests_beside_a_kept_header(server):
    """A binary header is kept; requests whose headers differ from it only in shared-memory parameters (an input in
    a region, an output into one) read and write their regions, with the coroutine route's errors."""
    x = np.arange(4, dtype=np.float32)
    texts = _prefixed((2, b"ab"), (1, b"c"))
    key = f"/attack5_fastroute_{id(server)}"
    handle = shm.create_shared_memory_region("attack5_region", key, 64)
    client = httpclient.InferenceServerClient(server.http_url)
    sock, buffer = connect(server.http_url), bytearray()
    try:
        shm.set_shared_memory_region(handle, [x * 10])
        client.register_system_shared_memory("attack5_region", key, 64)
        body, length, _ = _good()
        for _ in range(2):
            assert both_routes(sock, buffer, PATH, body, length).status == 200

        def in_region(byte_size: int, offset: int = 0, region: str = "attack5_region") -> tuple[bytes, int]:
            head = _compact_json({"inputs": [
                {"name": "IN_X", "datatype": "FP32", "shape": [4],
                 "parameters": {"shared_memory_region": region, "shared_memory_byte_size": byte_size,
                                "shared_memory_offset": offset}},
                {"name": "IN_T", "datatype": "BYTES", "shape": [2], "parameters": {"binary_data_size": len(texts)}}]})
            return head + texts, len(head)

        for _ in range(2):
            answer = both_routes(sock, buffer, PATH, *in_region(16))
            assert answer.status == 200 and answer.json["outputs"][0]["data"] == (x * 10).tolist(), answer
        for args, status in (((12,), 400), ((16, 56), 400), ((16, 0, "attack5_nowhere"), 404)):
            answer = both_routes(sock, buffer, PATH, *in_region(*args))
            assert answer.status == status, (args, answer)
        head = _compact_json({"inputs": [
            {"name": "IN_X", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 16}},
            {"name": "IN_T", "datatype": "BYTES", "shape": [2], "parameters": {"binary_data_size": len(texts)}}],
            "outputs": [{"name": "OUT_X", "parameters": {"shared_memory_region": "attack5_region",
                                                         "shared_memory_byte_size": 16,
                                                         "shared_memory_offset": 32}}]})
        for value in (3.0, 4.0):
            answer = ask(sock, buffer, PATH, head + np.full(4, value, dtype=np.float32).tobytes() + texts, len(head))
            assert answer.status == 200 and "data" not in answer.json["outputs"][0], answer
            out = shm.get_contents_as_numpy(handle, np.float32, [4], offset=32)
            assert out.tolist() == [value] * 4
        assert both_routes(sock, buffer, PATH, body, length).status == 200
        client.unregister_system_shared_memory()
    finally:
        sock.close()
        client.close()
        shm.destroy_shared_memory_region(handle)


def _compact_json(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def test_mutated_requests_answer_as_the_coroutine_route(server):
    """600 requests mutated from a few good ones (a byte of the JSON header changed, the header length moved, the
    binary part cut, extended or changed), seeded: each answered by the callback route exactly as by the
    coroutine route, which parses every header afresh."""
    rng = np.random.default_rng(20261126)
    seeds = [_good(n, **top) for n in (1, 4) for top in ({}, {"id": "x"}, {"parameters": {"binary_data_output": True}})]
    sock, buffer = connect(server.http_url), bytearray()
    statuses: dict[int, int] = {}
    with sock:
        for _ in range(600):
            body, length, _ = seeds[rng.integers(len(seeds))]
            body = bytearray(body)
            kind = rng.integers(5)
            if kind == 0:  # a byte of the header
                body[rng.integers(length)] = int(rng.integers(32, 127))
            elif kind == 1:  # the header length
                length = int(length + rng.integers(-3, 4))
            elif kind == 2:  # the binary part cut or extended
                cut = int(rng.integers(-6, 7))
                body = body[:cut] if cut < 0 else body + bytes(cut)
            elif kind == 3:  # a byte of the binary part (a BYTES length prefix among them)
                if len(body) > length:
                    body[length + rng.integers(len(body) - length)] = int(rng.integers(256))
            answer = both_routes(sock, buffer, PATH, bytes(body), length)
            statuses[answer.status] = statuses.get(answer.status, 0) + 1
    assert set(statuses) <= {200, 400}, statuses
    assert statuses.get(200, 0) > 100 and statuses.get(400, 0) > 100, statuses
