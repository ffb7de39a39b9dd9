"""Attacks on output copies by several threads (proxy/bigcopy.py): an output written over the input it came from
(a client region holding both, overlapping) must hold what a single copy gives: the input's values."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from pytriton.proxy.bigcopy import OutputCopier
from tests._support.serving import serve, tensor_args
from tests._support.shm import shm_segments_of

N = 3 << 20  # float32 elements: 12 MiB, over the 8 MiB threshold


@pytest.mark.parametrize("shift", [4, 4096, 1 << 20, -4096, -(1 << 20)])
def test_overlapping_arrays_are_copied_as_numpy_copies_them(shift):
    count = 4 << 20
    buffer = np.arange(count + abs(shift) // 4, dtype=np.int32)
    lo, hi = buffer[:count], buffer[abs(shift) // 4:abs(shift) // 4 + count]
    src, dst = (lo, hi) if shift > 0 else (hi, lo)
    expected = src.copy()
    with OutputCopier(threads=4) as copier:
        copier.copy(dst, src)
    np.testing.assert_array_equal(dst, expected)


@pytest.mark.parametrize("shift", [4096, -4096])
def test_an_output_region_over_its_input_holds_the_input(shift):
    args = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")])
    x = np.random.default_rng(7).random(N, dtype=np.float32)
    size = x.nbytes + abs(shift)
    key = f"/attack3_alias_{os.getpid()}"
    with serve("tests.models:identity", *args, env={"PYTRITON_OUTPUT_COPY_THREADS": "4"}) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        handle = shm.create_shared_memory_region("alias", key, size)
        try:
            in_offset, out_offset = (0, shift) if shift > 0 else (-shift, 0)
            shm.set_shared_memory_region(handle, [x], offset=in_offset)
            client.register_system_shared_memory("alias", key, size)
            tensor = grpcclient.InferInput("IN_X", [N], "FP32")
            tensor.set_shared_memory("alias", x.nbytes, offset=in_offset)
            out = grpcclient.InferRequestedOutput("OUT_X")
            out.set_shared_memory("alias", x.nbytes, offset=out_offset)
            client.infer("identity", [tensor], outputs=[out])
            got = shm.get_contents_as_numpy(handle, np.float32, [N], offset=out_offset)
            np.testing.assert_array_equal(got, x)
            client.unregister_system_shared_memory()
        finally:
            shm.destroy_shared_memory_region(handle)
        client.close()


@pytest.mark.parametrize("threads", ["1", "4"])
def test_an_output_region_over_its_input_under_another_name_holds_the_input(threads):
    """The same shared-memory object registered twice (two names): the worker maps it once (regions.py). The output
    lies 4096 bytes past the input, then 4096 bytes before it: with two mappings the overlap was not visible from the
    addresses, and the copy ran in one direction, the wrong one for one of the two (with one thread as well)."""
    args = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")])
    x = np.random.default_rng(8).random(N, dtype=np.float32)
    size = x.nbytes + 4096
    key = f"/attack3_alias2_{os.getpid()}"
    with serve("tests.models:identity", *args, env={"PYTRITON_OUTPUT_COPY_THREADS": threads}) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        handle = shm.create_shared_memory_region("alias_in", key, size)
        try:
            client.register_system_shared_memory("alias_in", key, size)
            client.register_system_shared_memory("alias_out", key, size)
            wrong = []
            for in_offset, out_offset in ((0, 4096), (4096, 0)):
                shm.set_shared_memory_region(handle, [x], offset=in_offset)
                tensor = grpcclient.InferInput("IN_X", [N], "FP32")
                tensor.set_shared_memory("alias_in", x.nbytes, offset=in_offset)
                out = grpcclient.InferRequestedOutput("OUT_X")
                out.set_shared_memory("alias_out", x.nbytes, offset=out_offset)
                client.infer("identity", [tensor], outputs=[out])
                got = shm.get_contents_as_numpy(handle, np.float32, [N], offset=out_offset)
                if not np.array_equal(got, x):
                    wrong.append(out_offset)
            client.unregister_system_shared_memory()
        finally:
            shm.destroy_shared_memory_region(handle)
        client.close()
    assert wrong == []


@pytest.mark.parametrize("when", ["before", "during"])
def test_an_output_region_that_shrinks_leaves_the_server_serving(when):
    """The client's object is cut to 4096 bytes before the copy (a clear error) or while the threads copy (the
    worker may die of SIGBUS: the call fails naming it, the worker is restarted); then the server answers."""
    args = ["--model-name", "shrinking"] + tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args(
        "output", [("OUT_X", "fp32", "-1")])
    size = 64 << 20
    key = f"/attack3_shrink_{os.getpid()}"
    with serve("tests.proxy._bigcopy_models:shrinking", *args, env={"PYTRITON_OUTPUT_COPY_THREADS": "4"}) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        (old_pid,) = server.worker_pids()
        handle = shm.create_shared_memory_region("shrink", key, size)
        try:
            client.register_system_shared_memory("shrink", key, size)
            tensor = grpcclient.InferInput("IN_X", [1], "FP32")
            tensor.set_data_from_numpy(np.zeros(1, dtype=np.float32))
            out = grpcclient.InferRequestedOutput("OUT_X")
            out.set_shared_memory("shrink", size)
            parameters = {"n": str(size // 4), "truncate": key, "when": when}
            try:
                client.infer("shrinking", [tensor], outputs=[out], parameters=parameters, client_timeout=30)
                failed = None
            except InferenceServerException as exc:
                failed = exc.message()
            if when == "before":
                assert failed is not None and "shrank" in failed, failed
            elif failed is not None and "shrank" not in failed:  # the worker died in the copy
                assert "shrinking_0_0" in failed and "SIGBUS" in failed, failed
                assert server.wait_for_log("started (pid", timeout_s=20)
                assert shm_segments_of({old_pid}) == []  # the dead worker's arenas are gone
            client.unregister_system_shared_memory()
        finally:
            shm.destroy_shared_memory_region(handle)
        result = client.infer("shrinking", [tensor], parameters={"n": "4", "truncate": "/attack3_none", "when": "x"},
                              client_timeout=30)  # (its cutting thread finds no object: it only logs)
        np.testing.assert_array_equal(result.as_numpy("OUT_X"), np.ones(4, dtype=np.float32))
        assert client.is_server_ready()
        client.close()


def test_one_object_under_several_region_ids_is_mapped_once_and_a_new_object_is_not_confused(tmp_path):
    from pytriton.proxy.messages import TensorRef
    from pytriton.proxy.regions import ClientRegions

    def ref(key: str, region_id: int, region_size: int, offset: int = 0, nbytes: int = 16) -> TensorRef:
        return TensorRef(name="X", region=key, region_size=region_size, region_id=region_id, offset=offset,
                         nbytes=nbytes)

    key = f"/attack3_regions_{os.getpid()}"
    path = "/dev/shm" + key
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.ftruncate(fd, 8192)
    regions = ClientRegions()
    try:
        a = np.frombuffer(regions.system_view(ref(key, 1, 8192)), np.uint8)
        b = np.frombuffer(regions.system_view(ref(key, 2, 4096, 8)), np.uint8)  # (bytes 8..24 of the object)
        assert np.may_share_memory(a, b)  # one mapping
        with pytest.raises(Exception, match="lies outside"):  # region 2's own bounds still hold
            regions.system_view(ref(key, 2, 4096, 4090, 16))
        os.close(fd)
        os.unlink(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)  # a new object under the old key
        os.ftruncate(fd, 8192)
        os.pwrite(fd, b"new!", 0)
        c = regions.system_view(ref(key, 3, 8192))
        assert bytes(c[:4]) == b"new!" and bytes(a[:4]) == bytes(4)  # its own mapping, not the old object's
        del a, b, c
        regions.unmap([1, 2, 3])
        assert not regions._objects
    finally:
        regions.close()
        os.close(fd)
        os.unlink(path)


def test_a_decoupled_model_raising_after_large_responses(tmp_path):
    """Two 16 MiB responses (copied by the threads into the response arena) then an error, ten times over one
    stream: every response arrives whole, each error once, and the arena's slots come back (the tenth works)."""
    import queue

    args = ["--decoupled", "--model-name", "big"] + tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args(
        "output", [("BIG", "fp32", "-1")])
    with serve("tests.proxy._bigcopy_models:big_then_raise", *args,
               env={"PYTRITON_OUTPUT_COPY_THREADS": "4"}) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        answers: queue.Queue = queue.Queue()
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        tensor = grpcclient.InferInput("IN_X", [1], "FP32")
        tensor.set_data_from_numpy(np.zeros(1, dtype=np.float32))
        for _ in range(10):
            client.async_stream_infer("big", [tensor])
            for step in (1, 2):
                try:
                    result, error = answers.get(timeout=10)
                except queue.Empty:
                    raise AssertionError(f"response {step} never came") from None
                assert error is None, error
                big = result.as_numpy("BIG")
                assert big.shape == (4 << 20,) and (big == step).all()
            result, error = answers.get(timeout=30)
            assert result is None and "failed after its large responses" in str(error)
        client.stop_stream()
        assert answers.empty()
        assert client.is_server_ready()
        client.close()
