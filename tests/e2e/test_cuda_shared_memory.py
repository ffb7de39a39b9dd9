"""CUDA shared memory end to end (needs a GPU and cupy: skipped otherwise), and the GPU-free bookkeeping."""

from __future__ import annotations

import base64
import importlib.util

import numpy as np
import pytest

from pytriton.config.gpus import gpu_available
from pytriton.core.shm_registry import CudaShmRegion, SharedMemoryRegistry, decode_cuda_handle
from pytriton.exceptions import ServerError
from tests._support.clients import client_for
from tests._support.serving import serve, tensor_args

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
    assert removed == []  # in use: still registered and listed (as Triton does) until released
    assert registry.cuda_status() == [{"name": "c", "device_id": 1, "byte_size": 4096}]
    registry.release([region])
    assert removed == [region] and registry.cuda_status() == []
    with pytest.raises(ServerError, match="^failed to register shared memory region: invalid args$"):
        registry.register_cuda("d", b"short", 0, 16)  # (gRPC's raw bytes: tritonserver 2.51's words)
    with pytest.raises(ServerError, match="must be a valid base64 encoded cudaIpcMemHandle_t"):
        registry.register_cuda("d", base64.b64encode(b"short").decode(), 0, 16)  # (HTTP's base64 text)


def test_cuda_handle_base64_may_be_broken_into_lines():
    # perf_analyzer's HTTP client sends the handle as libb64 writes it: lines of 72 characters
    handle = bytes(range(64))
    text = base64.b64encode(handle).decode()
    wrapped = "\n".join(text[i : i + 72] for i in range(0, len(text), 72)) + "\n"
    assert decode_cuda_handle(wrapped) == handle
    with pytest.raises(ServerError, match="must be a valid base64 encoded cudaIpcMemHandle_t"):
        decode_cuda_handle(wrapped.replace("A", "*"))


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


def _regions_module():
    import tritonclient.utils.cuda_shared_memory as cudashm  # needs cuda-python (cuda.bindings)

    return cudashm


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU and cupy (pytriton[gpu])")
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_tritonclient_cuda_shared_memory_utils_both_ways(protocol):
    # What a tritonclient user writes (and perf_analyzer --shared-memory cuda does): regions made by
    # tritonclient.utils.cuda_shared_memory, registered by raw handle, read back from the GPU.
    cudashm = _regions_module()
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    client_module = grpcclient if protocol == "grpc" else httpclient
    args = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")])
    with serve("tests.models:identity", *args) as server:
        client = client_for(server, protocol)
        data = np.linspace(-1, 1, 4096, dtype=np.float32)
        handles = {}
        try:
            for name in ("in", "out"):
                handles[name] = cudashm.create_shared_memory_region(f"{protocol}_{name}", data.nbytes, 0)
                client.register_cuda_shared_memory(
                    f"{protocol}_{name}", cudashm.get_raw_handle(handles[name]), 0, data.nbytes
                )
            cudashm.set_shared_memory_region(handles["in"], [data])
            status = client.get_cuda_shared_memory_status()
            assert len(status.regions if protocol == "grpc" else status) == 2
            for attempt in range(3):  # the region and its worker-side mapping are reused
                tensor = client_module.InferInput("IN_X", [data.size], "FP32")
                tensor.set_shared_memory(f"{protocol}_in", data.nbytes)
                output = client_module.InferRequestedOutput("OUT_X")
                output.set_shared_memory(f"{protocol}_out", data.nbytes)
                result = client.infer("identity", [tensor], outputs=[output])
                assert result.get_output("OUT_X") is not None
                got = cudashm.get_contents_as_numpy(handles["out"], np.float32, [data.size])
                np.testing.assert_array_equal(got, data)
                data = data * 3
                cudashm.set_shared_memory_region(handles["in"], [data])
            client.unregister_cuda_shared_memory()
            status = client.get_cuda_shared_memory_status()
            assert len(status.regions if protocol == "grpc" else status) == 0
        finally:
            for handle in handles.values():
                cudashm.destroy_shared_memory_region(handle)


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU and cupy (pytriton[gpu])")
def test_cuda_input_is_a_gpu_array_and_outputs_go_over_the_wire_or_into_gpu_memory():
    import cupy
    import tritonclient.grpc as grpcclient

    cudashm = _regions_module()
    args = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args(
        "output", [("OUT_X", "fp32", "-1"), ("KIND", "bytes", "1")]
    )
    with serve("tests.models:cuda_info", *args) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        data = np.arange(256, dtype=np.float32)
        gpu_in = cupy.asarray(data)
        client.register_cuda_shared_memory(
            "gin", base64.b64encode(cupy.cuda.runtime.ipcGetMemHandle(gpu_in.data.ptr)), 0, gpu_in.nbytes
        )
        tensor = grpcclient.InferInput("IN_X", [256], "FP32")
        tensor.set_shared_memory("gin", data.nbytes)
        # 1) GPU input, outputs over the wire: the worker copies the callable's cupy result to the host
        result = client.infer("cuda_info", [tensor])
        assert result.as_numpy("KIND")[0] == b"cupy"
        np.testing.assert_array_equal(result.as_numpy("OUT_X"), data * 2)
        # 2) host input, output into a CUDA region: numpy result copied host -> device by the worker
        out_handle = cudashm.create_shared_memory_region("gout", data.nbytes, 0)
        try:
            client.register_cuda_shared_memory("gout", cudashm.get_raw_handle(out_handle), 0, data.nbytes)
            host = grpcclient.InferInput("IN_X", [256], "FP32")
            host.set_data_from_numpy(data + 1)
            out = grpcclient.InferRequestedOutput("OUT_X")
            out.set_shared_memory("gout", data.nbytes)
            result = client.infer("cuda_info", [host], outputs=[out, grpcclient.InferRequestedOutput("KIND")])
            assert result.as_numpy("KIND")[0] == b"numpy"
            np.testing.assert_array_equal(cudashm.get_contents_as_numpy(out_handle, np.float32, [256]), (data + 1) * 2)
            # 3) GPU in, GPU out: device to device
            out = grpcclient.InferRequestedOutput("OUT_X")
            out.set_shared_memory("gout", data.nbytes)
            client.infer("cuda_info", [tensor], outputs=[out])
            np.testing.assert_array_equal(cudashm.get_contents_as_numpy(out_handle, np.float32, [256]), data * 2)
            # a region too small for the output: a clear error, the server keeps serving
            client.register_cuda_shared_memory("tiny", cudashm.get_raw_handle(out_handle), 0, 16)
            small = grpcclient.InferRequestedOutput("OUT_X")
            small.set_shared_memory("tiny", 16)
            with pytest.raises(Exception, match="should be at least 1024 bytes"):
                client.infer("cuda_info", [tensor], outputs=[small])
            assert client.infer("cuda_info", [tensor]).as_numpy("KIND")[0] == b"cupy"
            client.unregister_cuda_shared_memory()
        finally:
            cudashm.destroy_shared_memory_region(out_handle)


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU and cupy (pytriton[gpu])")
def test_a_handle_that_does_not_open_fails_the_request_clearly_and_the_server_stays_up():
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    args = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")])
    with serve("tests.models:identity", *args) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        client.register_cuda_shared_memory("bogus", base64.b64encode(b"\x01" * 64), 0, 1024)
        tensor = grpcclient.InferInput("IN_X", [256], "FP32")
        tensor.set_shared_memory("bogus", 1024)
        with pytest.raises(InferenceServerException, match="CUDA shared memory region of tensor 'IN_X'"):
            client.infer("identity", [tensor])
        client.unregister_cuda_shared_memory("bogus")
        plain = grpcclient.InferInput("IN_X", [4], "FP32")
        plain.set_data_from_numpy(np.ones(4, dtype=np.float32))
        np.testing.assert_array_equal(client.infer("identity", [plain]).as_numpy("OUT_X"), np.ones(4))


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU and cupy (pytriton[gpu])")
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_cuda_regions_registered_once_serve_every_front_end_process(protocol):
    """With --frontend-processes 2 a CUDA registration made on one connection is ordered into every process
    (docs/multi-frontend.md): requests on 16 new connections (the kernel spreads them over both processes; all on
    one would be a 1-in-32,768 draw) read and write the client's GPU regions, every connection lists them, and an
    unregistration through yet another connection removes them everywhere."""
    cudashm = _regions_module()
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    module = grpcclient if protocol == "grpc" else httpclient
    args = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")])

    def connect(server):  # a connection of its own (grpc shares one per process unless told not to)
        if protocol == "grpc":
            return grpcclient.InferenceServerClient(server.grpc_url,
                                                    channel_args=[("grpc.use_local_subchannel_pool", 1)])
        return httpclient.InferenceServerClient(server.http_url)

    def listed(client) -> int:
        status = client.get_cuda_shared_memory_status()
        return len(status.regions if protocol == "grpc" else status)

    with serve("tests.models:identity", *args, "--frontend-processes", "2") as server:
        data = np.linspace(-1, 1, 4096, dtype=np.float32)
        handles = {name: cudashm.create_shared_memory_region(f"fe_{protocol}_{name}", data.nbytes, 0)
                   for name in ("in", "out")}
        try:
            client = connect(server)
            for name, handle in handles.items():
                client.register_cuda_shared_memory(f"fe_{protocol}_{name}", cudashm.get_raw_handle(handle), 0,
                                                   data.nbytes)
            client.close()
            for attempt in range(16):
                values = data * (attempt + 1)
                cudashm.set_shared_memory_region(handles["in"], [values])
                client = connect(server)
                try:
                    assert listed(client) == 2
                    tensor = module.InferInput("IN_X", [data.size], "FP32")
                    tensor.set_shared_memory(f"fe_{protocol}_in", data.nbytes)
                    output = module.InferRequestedOutput("OUT_X")
                    output.set_shared_memory(f"fe_{protocol}_out", data.nbytes)
                    client.infer("identity", [tensor], outputs=[output])
                    got = cudashm.get_contents_as_numpy(handles["out"], np.float32, [data.size])
                    np.testing.assert_array_equal(got, values)
                finally:
                    client.close()
            client = connect(server)
            client.unregister_cuda_shared_memory()
            client.close()
            for _ in range(8):
                client = connect(server)
                try:
                    assert listed(client) == 0
                finally:
                    client.close()
        finally:
            for handle in handles.values():
                cudashm.destroy_shared_memory_region(handle)
