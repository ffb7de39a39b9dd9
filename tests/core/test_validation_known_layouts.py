"""Attacks on validation once per request layout (a gRPC header seen before skips the layout checks): a request
whose header repeats a layout that passed must still be refused for what its data says, for shared-memory or
classification parameters, and after its model was loaded again with another configuration."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tests._support.serving import serve, tensor_args

ARGS = tensor_args("input", [("IN_X", "fp32", "-1"), ("IN_T", "bytes", "-1")]) + tensor_args(
    "output", [("OUT_X", "fp32", "-1"), ("OUT_T", "bytes", "-1")]
)


def _inputs(x: np.ndarray, texts: list[bytes], raw_x: bytes | None = None, raw_t: bytes | None = None):
    a = grpcclient.InferInput("IN_X", list(x.shape), "FP32")
    a.set_data_from_numpy(x)
    b = grpcclient.InferInput("IN_T", [len(texts)], "BYTES")
    b.set_data_from_numpy(np.array(texts, dtype=np.object_))
    if raw_x is not None:  # the same header, other data
        a._raw_content = raw_x
    if raw_t is not None:
        b._raw_content = raw_t
    return [a, b]


def _error(call, status: str = "INVALID_ARGUMENT") -> str:
    with pytest.raises(InferenceServerException) as caught:
        call()
    assert caught.value.status() == f"StatusCode.{status}", caught.value
    return caught.value.message()


def _prefixed(*items: tuple[int, bytes]) -> bytes:
    return b"".join(struct.pack("<I", n) + data for n, data in items)


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:identity", *ARGS) as running:
        yield running


def test_a_known_layout_with_wrong_data_is_refused_as_a_new_one(server):
    """Each bad request is sent first under version "1" (another header: checked in full), then under the header
    whose layout passed: the same error word for word; good requests are answered between them."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    x = np.arange(4, dtype=np.float32)
    good = _inputs(x, [b"ab", b"c"])
    bad = {
        "short data": _inputs(x, [b"ab", b"c"], raw_x=x.tobytes()[:12]),
        "long data": _inputs(x, [b"ab", b"c"], raw_x=x.tobytes() + b"\0" * 4),
        "empty data": _inputs(x, [b"ab", b"c"], raw_x=b""),
        "a length past the end": _inputs(x, [b"ab", b"c"], raw_t=_prefixed((1 << 31, b"ab"), (1, b"c"))),
        "a cut length": _inputs(x, [b"ab", b"c"], raw_t=_prefixed((2, b"ab")) + b"\1\0"),
        "one element too many": _inputs(x, [b"ab", b"c"], raw_t=_prefixed((2, b"ab"), (1, b"c"), (0, b""))),
        "one element too few": _inputs(x, [b"ab", b"c"], raw_t=_prefixed((3, b"abc"))),
        "no bytes": _inputs(x, [b"ab", b"c"], raw_t=b""),
    }
    for _ in range(2):  # (the first one teaches the layout)
        result = client.infer("identity", good)
        np.testing.assert_array_equal(result.as_numpy("OUT_X"), x)
    for what, inputs in bad.items():
        fresh = _error(lambda: client.infer("identity", inputs, model_version="1"))
        known = _error(lambda: client.infer("identity", inputs))
        assert known == fresh, what
        assert "IN_X" in known or "IN_T" in known, (what, known)
        np.testing.assert_array_equal(client.infer("identity", good).as_numpy("OUT_X"), x)
    client.close()


def test_more_layouts_than_remembered_still_check_the_first(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    for n in range(1, 71):  # 70 layouts of one model (64 are remembered)
        x = np.full(n, n, dtype=np.float32)
        np.testing.assert_array_equal(client.infer("identity", _inputs(x, [b"t"] * n)).as_numpy("OUT_X"), x)
        x1 = np.ones(1, dtype=np.float32)
        assert "byte size mismatch" in _error(lambda: client.infer("identity", _inputs(x1, [b"t"], raw_x=b"\0" * 8)))
    for n in (1, 2, 69, 70):
        x = np.ones(n, dtype=np.float32)
        message = _error(lambda: client.infer("identity", _inputs(x, [b"t"] * n, raw_x=b"\0" * (4 * n + 4))))
        assert f"Expected {4 * n}, got {4 * n + 4}" in message
    client.close()


def test_a_known_layout_with_shared_memory_or_classification_is_checked(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    x = np.array([0.5, 3.0, 1.0, 2.0], dtype=np.float32)
    for _ in range(2):
        client.infer("identity", _inputs(x, [b"a"]))
    # classification on the same inputs: the top class, as Triton writes it
    out = grpcclient.InferRequestedOutput("OUT_X", class_count=2)
    result = client.infer("identity", _inputs(x, [b"a"]), outputs=[out])
    assert list(result.as_numpy("OUT_X")) == [b"3.000000:1", b"2.000000:3"]
    # a region smaller than the input, a region never registered, an offset past the end
    key = f"/attack3_layout_{id(client)}"
    handle = shm.create_shared_memory_region("attack3_in", key, 16)
    try:
        shm.set_shared_memory_region(handle, [x])
        client.register_system_shared_memory("attack3_in", key, 16)
        inputs = _inputs(x, [b"a"])
        inputs[0].set_shared_memory("attack3_in", 12)
        assert "IN_X" in _error(lambda: client.infer("identity", inputs))
        inputs[0].set_shared_memory("attack3_nowhere", 16)
        assert "attack3_nowhere" in _error(lambda: client.infer("identity", inputs), "NOT_FOUND")
        inputs[0].set_shared_memory("attack3_in", 16, offset=8)
        _error(lambda: client.infer("identity", inputs))
        inputs = _inputs(x, [b"a"])  # (tritonclient keeps an offset once set)
        inputs[0].set_shared_memory("attack3_in", 16)
        np.testing.assert_array_equal(client.infer("identity", inputs).as_numpy("OUT_X"), x)
        # the output into a region too small for it
        out = grpcclient.InferRequestedOutput("OUT_X")
        out.set_shared_memory("attack3_in", 8)
        message = _error(lambda: client.infer("identity", _inputs(x, [b"a"]), outputs=[out]), "INTERNAL")
        assert "for output 'OUT_X' (8 bytes) should be at least 16 bytes" in message  # (Triton's status too)
        client.unregister_system_shared_memory()
    finally:
        shm.destroy_shared_memory_region(handle)
    client.close()


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


def _write(repo: Path, name: str, dims: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(SCALE_CONFIG.format(name=name, dims=dims))
    (repo / name / "1" / "model.py").write_text(SCALE_MODEL)


def _x(n: int):
    x = np.arange(n, dtype=np.float32)
    tensor = grpcclient.InferInput("X", [n], "FP32")
    tensor.set_data_from_numpy(x)
    return [tensor], x


def test_a_model_loaded_again_with_another_config_checks_the_layout_again(tmp_path):
    """`scale` takes X [-1], `fixed` (same tensor names) X [4]; a layout that passed on `scale` is refused once
    `scale` is loaded again with X [4] (a config override), then with INT32, then after an unload and a load."""
    _write(tmp_path, "scale", "-1")
    _write(tmp_path, "fixed", "4")
    args = ["--model-repository", str(tmp_path), "--model-control-mode", "explicit", "--load-model", "scale",
            "--load-model", "fixed"]
    with serve(*args) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        three, x = _x(3)
        for _ in range(2):
            np.testing.assert_array_equal(client.infer("scale", three).as_numpy("Y"), x)
        assert "unexpected shape for input 'X' for model 'fixed'" in _error(lambda: client.infer("fixed", three))
        np.testing.assert_array_equal(client.infer("scale", three).as_numpy("Y"), x)

        def config(datatype: str, dims: list[int]) -> str:
            return json.dumps({"name": "scale", "backend": "python", "max_batch_size": 0,
                               "input": [{"name": "X", "data_type": datatype, "dims": dims}],
                               "output": [{"name": "Y", "data_type": datatype, "dims": dims}]})

        client.load_model("scale", config=config("TYPE_FP32", [4]))  # loaded again in place
        assert "unexpected shape for input 'X' for model 'scale'" in _error(lambda: client.infer("scale", three))
        four, x4 = _x(4)
        np.testing.assert_array_equal(client.infer("scale", four).as_numpy("Y"), x4)
        client.infer("scale", four)  # (this layout is remembered now)
        client.load_model("scale", config=config("TYPE_INT32", [4]))
        assert "data-type is 'FP32', but model 'scale' expects 'INT32'" in _error(lambda: client.infer("scale", four))
        client.unload_model("scale")
        client.load_model("scale", config=config("TYPE_FP32", [3]))
        assert "unexpected shape" in _error(lambda: client.infer("scale", four))
        np.testing.assert_array_equal(client.infer("scale", three).as_numpy("Y"), x)
        client.close()
