"""Router (server side) and worker loop together in one process: the worker runs in a thread."""

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
from pytriton.model_config.datatypes import deserialize_bytes_tensor, serialize_bytes_tensor
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.arena import our_segments
from pytriton.proxy.messages import RequestData, TensorData
from pytriton.proxy.router import ProxyRouter, WorkerGoneError

CONFIG = TritonModelConfig(
    model_name="identity",
    inputs=[TensorSpec("IN_FP32", "FP32", (-1,)), TensorSpec("IN_BYTES", "BYTES", (-1,))],
    outputs=[TensorSpec("OUT_FP32", "FP32", (-1,)), TensorSpec("OUT_BYTES", "BYTES", (-1,))],
)


def run_pair(inline_max: int, scenario):
    """Start a router and a worker thread serving tests.models:identity, run `scenario(router, link)`."""

    async def main():
        tag = secrets.token_hex(4)
        with tempfile.TemporaryDirectory() as run_dir:
            router = ProxyRouter(f"ipc://{run_dir}/w.sock", tag, inline_max=inline_max)
            link = router.add_link(b"identity#0#1", "identity_0_0")
            spec = WorkerSpec(address=router.address, identity="identity#0#1", tag=tag, server_pid=os.getpid(),
                              inline_max=inline_max, config=CONFIG, callable="tests.models:identity", watch="none")
            thread = threading.Thread(target=worker.serve, args=(spec,), daemon=True)
            thread.start()
            try:
                await asyncio.wait_for(link.hello, 10)
                await scenario(router, link)
            finally:
                router.stop_worker(link)
                await asyncio.get_running_loop().run_in_executor(None, thread.join, 10)
                router.close()
            assert list(our_segments(tag)) == []

    asyncio.run(main())


def request(values: np.ndarray, words: list[bytes]) -> RequestData:
    words_array = np.array(words, dtype=object)
    return RequestData(
        inputs=[
            TensorData("IN_FP32", "FP32", values.shape, values.tobytes()),
            TensorData("IN_BYTES", "BYTES", words_array.shape, serialize_bytes_tensor(words_array)),
        ],
        requested_outputs=[],
        parameters={},
    )


def outputs_of(result):
    out = {}
    for tensor in result.responses[0].outputs:
        if tensor.datatype == "BYTES":
            out[tensor.name] = deserialize_bytes_tensor(tensor.data, tensor.shape)
        else:
            out[tensor.name] = np.frombuffer(tensor.data, dtype=np.float32).reshape(tensor.shape).copy()
    return out


@pytest.mark.parametrize("inline_max", [0, 1 << 16], ids=["all-in-shm", "small-inline"])
def test_round_trip_and_slots_are_freed(inline_max):
    async def scenario(router, link):
        for size in (0, 16, 300_000, 5_000_000):
            values = np.random.default_rng(size).random(size, dtype=np.float32)
            result = await router.execute(link, [request(values, [b"a", b"", b"xyz" * size])])
            out = outputs_of(result)
            np.testing.assert_array_equal(out["OUT_FP32"], values)
            assert list(out["OUT_BYTES"]) == [b"a", b"", b"xyz" * size]
            result.release_buffers()
        # Request slots are freed as soon as the answer arrives.
        assert router.arena.allocated_slots == 0
        # Released response slots wait for the next request to the worker, which carries them back.
        values = np.ones(300_000, dtype=np.float32)
        result = await router.execute(link, [request(values, [b"x"])])
        result.release_buffers()
        assert len(link.pending_free) == (2 if inline_max == 0 else 1)
        result = await router.execute(link, [request(np.ones(1, dtype=np.float32), [b"x"])])
        assert len(link.pending_free) == 0
        result.release_buffers()

    run_pair(inline_max, scenario)


def test_batch_of_requests_in_one_execution():
    async def scenario(router, link):
        batch = [request(np.full(4, i, dtype=np.float32), [str(i).encode()]) for i in range(5)]
        result = await router.execute(link, batch)
        assert len(result.responses) == 5
        for i, response in enumerate(result.responses):
            fp32 = next(t for t in response.outputs if t.name == "OUT_FP32")
            assert np.frombuffer(fp32.data, dtype=np.float32).tolist() == [i] * 4
        result.release_buffers()

    run_pair(1 << 16, scenario)


def test_dropping_a_link_fails_in_flight_calls():
    async def scenario(router, link):
        other = router.add_link(b"nobody#0#1", "nobody_0_0")
        with pytest.raises(WorkerGoneError, match="not connected"):
            await router.execute(other, [request(np.ones(4, dtype=np.float32), [b"a"])])
        router.drop_link(other, "gone")
        with pytest.raises(WorkerGoneError, match="not running"):
            await router.execute(other, [request(np.ones(4, dtype=np.float32), [b"a"])])

    run_pair(1 << 16, scenario)


def test_an_abandoned_call_frees_its_slots_and_reports_the_answer():
    async def scenario(router, link):
        values = np.ones(300_000, dtype=np.float32)  # large: a request slot, and a response slot back
        call_id, future = router.submit_call(link, [request(values, [b"a"])])
        answers = []
        future.cancel()  # the caller went away before the worker answered
        router.abandon(link, call_id, answers.append)
        deadline = asyncio.get_running_loop().time() + 10
        while not answers and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert len(answers) == 1 and answers[0].id == call_id
        assert call_id not in link.pending
        assert router.arena.allocated_slots == 0  # the request's slot
        assert len(link.pending_free) == 2  # the response's slots, handed back with the next request
        result = await router.execute(link, [request(np.ones(1, dtype=np.float32), [b"x"])])
        assert len(link.pending_free) == 0
        result.release_buffers()
        # abandoned, then the worker disappears: the callback hears None
        gone = []
        call_id, future = router.submit_call(link, [request(values, [b"b"])])
        future.cancel()
        router.abandon(link, call_id, gone.append)
        router.drop_link(link, "stopped")
        assert gone == [None] and router.arena.allocated_slots == 0

    run_pair(0, scenario)
