"""Large outputs copied into place by several threads (PYTRITON_OUTPUT_COPY_THREADS): what the client reads, through
its system shared memory at offsets or in the response, is exactly what the model returned, whatever its dtype and
layout; a bound model's copy threads end with the server."""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm

from tests._support.serving import serve, tensor_args

ROWS = 2049  # IN_X holds ROWS * 1024 floats (8 MiB): OUT_T 8 MiB, OUT_B 2 MiB, OUT_H 4 MiB, OUT_L 16 MiB
N = ROWS * 1024
ARGS = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args(
    "output", [("OUT_T", "fp32", "-1,-1"), ("OUT_B", "bool", "-1"), ("OUT_H", "fp16", "-1"), ("OUT_L", "int64", "-1")]
)
PROTOCOLS = ["grpc", "http"]


def expected(x: np.ndarray) -> dict[str, np.ndarray]:
    return {"OUT_T": x.reshape(-1, 1024).T, "OUT_B": x > 0, "OUT_H": x.astype(np.float16)[::-1],
            "OUT_L": x.astype(np.int64)}


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:large_views", *ARGS, env={"PYTRITON_OUTPUT_COPY_THREADS": "3"}) as server:
        yield server


def _client(server, protocol: str):
    if protocol == "grpc":
        return grpcclient, grpcclient.InferenceServerClient(server.grpc_url)
    return httpclient, httpclient.InferenceServerClient(server.http_url, network_timeout=120)


def _input(mod, seed: int) -> tuple[object, np.ndarray]:
    x = (np.random.default_rng(seed).standard_normal(N) * 1000).astype(np.float32)
    tensor = mod.InferInput("IN_X", [N], "FP32")
    tensor.set_data_from_numpy(x, **({} if mod is grpcclient else {"binary_data": True}))
    return tensor, x


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_large_outputs_in_the_response_are_exact(server, protocol):
    mod, client = _client(server, protocol)
    for seed in range(2):
        tensor, x = _input(mod, seed)
        outputs = [mod.InferRequestedOutput(name, **({} if mod is grpcclient else {"binary_data": True}))
                   for name in expected(x)]
        result = client.infer("large_views", [tensor], outputs=outputs)
        for name, want in expected(x).items():
            got = result.as_numpy(name)
            assert got.dtype == want.dtype and got.shape == want.shape, name
            np.testing.assert_array_equal(got, want, err_msg=name)
    client.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_large_outputs_into_system_shared_memory_at_offsets(server, protocol):
    mod, client = _client(server, protocol)
    key = f"/pt_test_outcopy_{uuid.uuid4().hex[:8]}"
    want = expected(np.zeros(N, dtype=np.float32))
    gap = 4096 + 8  # bytes between two outputs (and before the first): not page-aligned offsets
    size = sum(a.nbytes + gap for a in want.values()) + gap
    handle = shm.create_shared_memory_region("outcopy", key, size)
    try:
        client.register_system_shared_memory("outcopy", key, size - 4096, offset=4096)
        for seed in range(2):
            shm.set_shared_memory_region(handle, [np.full(size, 0xA5, dtype=np.uint8)])
            tensor, x = _input(mod, 10 + seed)
            outputs, places, offset = [], {}, gap
            for name, array in expected(x).items():
                output = mod.InferRequestedOutput(name)
                output.set_shared_memory("outcopy", array.nbytes, offset=offset)
                outputs.append(output)
                places[name] = 4096 + offset
                offset += array.nbytes + gap
            client.infer("large_views", [tensor], outputs=outputs)
            raw = shm.get_contents_as_numpy(handle, np.uint8, [size])
            covered = np.zeros(size, dtype=bool)
            for name, array in expected(x).items():
                start = places[name]
                got = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
                np.testing.assert_array_equal(got, array, err_msg=name)
                covered[start:start + array.nbytes] = True
            assert (raw[~covered] == 0xA5).all()  # nothing written outside the outputs
        client.unregister_system_shared_memory("outcopy")
    finally:
        shm.destroy_shared_memory_region(handle)
        client.close()


def test_a_bound_models_copy_threads_end_with_the_server():
    from pytriton.model_config import ModelConfig, Tensor  # noqa: PLC0415
    from pytriton.triton import Triton, TritonConfig  # noqa: PLC0415

    def infer(requests):
        return [{"OUT": np.repeat(r["IN"], 1 << 20)} for r in requests]  # each input float 4 MiB of output

    before = {t.ident for t in threading.enumerate()}
    config = TritonConfig(http_port=0, grpc_port=0, metrics_port=0, http_address="127.0.0.1", grpc_address="127.0.0.1",
                          metrics_address="127.0.0.1")
    with Triton(config=config) as triton:
        triton.bind("spread", infer, inputs=[Tensor(name="IN", dtype=np.float32, shape=(-1,))],
                    outputs=[Tensor(name="OUT", dtype=np.float32, shape=(-1,))],
                    config=ModelConfig(batching=False))
        triton.run()
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{triton.ports['grpc']}")
        tensor = grpcclient.InferInput("IN", [2], "FP32")
        tensor.set_data_from_numpy(np.array([1.5, -2.0], dtype=np.float32))
        result = client.infer("spread", [tensor])
        np.testing.assert_array_equal(result.as_numpy("OUT"), np.repeat(np.array([1.5, -2.0], np.float32), 1 << 20))
        client.close()
        copying = [t for t in threading.enumerate() if t.name.startswith("pytriton-output-copy")]
        assert copying and all(t.daemon for t in copying)  # the 8 MiB output was copied by the pool
    left = [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("pytriton-output-copy")]
    assert left == []
