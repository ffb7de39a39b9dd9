"""The translator between the core's requests and the transport's, and a model instance over a real worker."""

from __future__ import annotations

import asyncio
import os
import secrets
import tempfile
import threading

import numpy as np
import pytest

from pytriton.backends import worker
from pytriton.backends.spec import WorkerSpec
from pytriton.core.shm_registry import CudaShmRegion, SystemShmRegion
from pytriton.core.types import ExecutionRequest, RegionSlice, Tensor
from pytriton.exceptions import ServerError, Status
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.arena import our_segments
from pytriton.proxy.router import ProxyRouter
from pytriton.scheduler.dispatcher import ModelScheduler
from pytriton.scheduler.job import Job
from pytriton.supervisor.instance import LinkedInstance, to_request_data


def test_regions_become_keys_and_absolute_offsets_for_the_worker():
    system = SystemShmRegion("input_region", "/client_key", offset=100, byte_size=1000, id=7)
    cuda = CudaShmRegion("gpu_region", b"h" * 64, device_id=1, byte_size=4096, id=8)
    request = ExecutionRequest(
        inputs=[Tensor("A", "FP32", (4,), b"\0" * 16), Tensor("B", "FP32", (4,)), Tensor("C", "INT8", (2,))],
        input_regions={"B": RegionSlice(system, 40, 16), "C": RegionSlice(cuda, 8, 2)},
        requested_outputs=["OUT"],
        output_regions={"OUT": RegionSlice(system, 200, 64)},
        parameters={"p": 1},
    )
    data = to_request_data(request)
    a, b, c = data.inputs
    assert a.data == b"\0" * 16 and not a.region
    assert (b.region, b.offset, b.nbytes, b.region_size, b.region_id) == ("/client_key", 140, 16, 1100, 7)
    assert (c.cuda_handle, c.cuda_device, c.offset, c.nbytes, c.region_size) == (b"h" * 64, 1, 8, 2, 4096)
    (out,) = data.output_regions
    assert (out.name, out.region, out.offset, out.nbytes) == ("OUT", "/client_key", 300, 64)
    assert data.requested_outputs == ["OUT"] and data.parameters == {"p": 1}


CONFIG = TritonModelConfig(
    model_name="identity",
    inputs=[TensorSpec("IN_FP32", "FP32", (-1,))],
    outputs=[TensorSpec("OUT_FP32", "FP32", (-1,))],
)


def test_an_instance_over_a_worker_answers_releases_per_request_and_fails_when_the_worker_goes():
    async def main():
        tag = secrets.token_hex(4)
        with tempfile.TemporaryDirectory() as run_dir:
            router = ProxyRouter(f"ipc://{run_dir}/w.sock", tag, inline_max=0)  # every tensor in shared memory
            link = router.add_link(b"identity#0#1", "identity_0_0")
            spec = WorkerSpec(address=router.address, identity="identity#0#1", tag=tag, server_pid=os.getpid(),
                              inline_max=0, callable="tests.models:identity", config=CONFIG, watch="none")
            thread = threading.Thread(target=worker.serve, args=(spec,), daemon=True)
            thread.start()
            try:
                await asyncio.wait_for(link.hello, 10)
                scheduler = ModelScheduler("identity")
                scheduler.add_instance(LinkedInstance(router, link))
                jobs = []
                for i in range(3):
                    values = np.full(100_000, i, dtype=np.float32)
                    job = Job(ExecutionRequest([Tensor("IN_FP32", "FP32", values.shape, values.tobytes())], {}, [], {},
                                               {}))
                    scheduler.submit(job)
                    jobs.append(job)
                outputs = [(await asyncio.wait_for(job.future, 10)).result for job in jobs]
                for i, output in enumerate(outputs):
                    (tensor,) = output.outputs
                    assert np.frombuffer(tensor.data, dtype=np.float32)[0] == i
                    output.release()
                    output.release()  # a second release is a no-op, not a double free
                assert len(link.pending_free) == 3
                job = Job(ExecutionRequest([Tensor("IN_FP32", "FP32", (1,), b"\0" * 4)], {}, [], {}, {}))
                router.drop_link(link, "the worker went away")  # nothing to send to any more
                scheduler.submit(job)  # the instance is found gone: it leaves, and the job waits for another one
                assert not scheduler.ready and scheduler.queue_size == 1
                scheduler.set_unavailable("no worker can come back")  # as a source says when none can
                with pytest.raises(ServerError) as info:
                    await asyncio.wait_for(job.future, 10)
                assert info.value.status == Status.UNAVAILABLE
            finally:
                router.stop_worker(link)
                router.close()
                await asyncio.get_running_loop().run_in_executor(None, thread.join, 10)
            assert list(our_segments(tag)) == []

    asyncio.run(main())


class _CreditRecorder:
    def __init__(self):
        self.sent: list[int] = []

    def credit(self, link, call_id, consumed):
        self.sent.append(consumed)


class _Link:
    label = "m_0"


def _stream_call():
    from pytriton.supervisor.instance import _WorkerCall

    router = _CreditRecorder()
    instance = LinkedInstance(router, _Link(), streaming=True)  # type: ignore[arg-type]
    return router, _WorkerCall(instance, sink=None, count=1)  # type: ignore[arg-type]


def test_a_stream_is_credited_after_half_a_byte_window_of_taken_responses():
    """A worker stops when the responses its consumers have not taken hold STREAM_WINDOW_BYTES: one response that
    large must bring credit back once taken, however few responses that is (it stalled the stream before)."""
    from pytriton.supervisor.instance import STREAM_WINDOW, STREAM_WINDOW_BYTES

    router, call = _stream_call()
    call.sizes.append(STREAM_WINDOW_BYTES)  # one response delivered, as large as the whole byte window
    call.consumed(1)
    assert router.sent == [1]
    for _ in range(3):  # small ones: credit only every half window of responses
        call.sizes.append(1024)
    call.consumed(4)
    assert router.sent == [1]
    call.sizes.extend([STREAM_WINDOW_BYTES // 4] * 2)  # two quarter-window responses taken: half the bytes
    call.consumed(5)
    assert router.sent == [1]
    call.consumed(6)
    assert router.sent == [1, 6]
    call.sizes.extend([16] * STREAM_WINDOW)
    call.consumed(6 + STREAM_WINDOW // 2)
    assert router.sent == [1, 6, 6 + STREAM_WINDOW // 2]
