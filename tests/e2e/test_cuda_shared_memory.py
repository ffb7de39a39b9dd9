"""CUDA shared memory end to end (needs a GPU and cupy: skipped otherwise), and the GPU-free bookkeeping."""

from __future__ import annotations

import base64
import importlib.util

import numpy as np
import pytest

from pytriton.app import gpu_available
from pytriton.core.shm_registry import CudaShmRegion, SharedMemoryRegistry
from pytriton.exceptions import ServerError
from tests.conftest import serve, tensor_args

HAS_GPU = importlib.util.find_spec("cupy") is not None and gpu_available()


def test_cuda_region_bookkeeping_without_a_gpu():
    registry = SharedMemoryRegistry(gpu_available=lambda: True)
    removed = []
    registry.on_removed.append(removed.append)
    handle = bytes(range(64))
    region = registry.register_cuda("c", base64.b64encode(handle).decode(), 1, 4096)
    assert (region.raw_handle, region.device_id, region.byte_size) == (handle, 1, 4096)
    assert registry.cuda_status() == [{"name": "c", "device_id": 1, "byte_size": 4096}]
    with pytest.raises(ServerError, match="registered as CUDA shared memory, not system"):
        registry.system_status("c")
    assert registry.lookup("c", 1024, 1024) is region
    with pytest.raises(ServerError, match="Invalid offset \\+ byte size"):
        registry.lookup("c", 4000, 1024)
    registry.acquire([region])
    registry.unregister(CudaShmRegion, "c")
    assert removed == [] and registry.cuda_status() == []  # in use: removed when released
    registry.release([region])
    assert removed == [region]
    with pytest.raises(ServerError, match="must be a valid base64 encoded cudaIpcMemHandle_t"):
        registry.register_cuda("d", b"short", 0, 16)


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU and cupy (pytriton[gpu])")
def test_cuda_input_and_output_regions_with_tritonclient():
    import cupy
    import tritonclient.http as httpclient

    args = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")])
    with serve("tests.models:identity", *args) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        data = np.arange(1024, dtype=np.float32)
        gpu_in = cupy.asarray(data)
        gpu_out = cupy.zeros(1024, dtype=cupy.float32)
        for name, array in (("in", gpu_in), ("out", gpu_out)):
            handle = cupy.cuda.runtime.ipcGetMemHandle(array.data.ptr)
            client.register_cuda_shared_memory(name, base64.b64encode(handle), 0, array.nbytes)
        tensor = httpclient.InferInput("IN_X", [1024], "FP32")
        tensor.set_shared_memory("in", data.nbytes)
        output = httpclient.InferRequestedOutput("OUT_X", binary_data=False)
        output.set_shared_memory("out", data.nbytes)
        result = client.infer("identity", [tensor], outputs=[output])
        assert result.get_output("OUT_X")["shape"] == [1024]
        cupy.cuda.Device().synchronize()
        np.testing.assert_array_equal(cupy.asnumpy(gpu_out), data)
        client.unregister_cuda_shared_memory()
