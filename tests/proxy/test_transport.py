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
from pytriton.model_config.datatypes import TRITON_TO_CODE, deserialize_bytes_tensor, serialize_bytes_tensor
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.arena import our_segments
from pytriton.proxy.messages import RequestData, TensorData
from pytriton.proxy.router import ProxyRouter, WorkerGoneError, response_slots

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


class FutureCall:
    """A router Call that resolves a future with the final RESULT (message, frames)."""

    def __init__(self) -> None:
        self.future = asyncio.get_running_loop().create_future()
        self.replies = 0
        self.gone: str | None = None

    def on_reply(self, message, frames) -> None:
        self.replies += 1
        if message.final:
            self.future.set_result((message, frames))

    def on_gone(self, reason: str) -> None:
        self.gone = reason
        self.future.set_exception(WorkerGoneError(reason))


async def execute(router, link, requests):
    call = FutureCall()
    router.submit(link, requests, call)
    return await call.future


def outputs_of(link, message, frames, index=0):
    """The outputs of one response as numpy arrays (copies); its response slots go back to the worker."""
    out = {}
    for ref in message.responses[index].outputs:
        data = frames[ref.frame - 1].buffer if ref.frame else link.segments.view(ref.segment, ref.offset, ref.nbytes)
        if ref.dtype == TRITON_TO_CODE["BYTES"]:
            out[ref.name] = deserialize_bytes_tensor(data, tuple(ref.shape))
        else:
            out[ref.name] = np.frombuffer(data, dtype=np.float32).reshape(tuple(ref.shape)).copy()
    return out


@pytest.mark.parametrize("inline_max", [0, 1 << 16], ids=["all-in-shm", "small-inline"])
def test_round_trip_and_slots_are_freed(inline_max):
    async def scenario(router, link):
        for size in (0, 16, 300_000, 5_000_000):
            values = np.random.default_rng(size).random(size, dtype=np.float32)
            message, frames = await execute(router, link, [request(values, [b"a", b"", b"xyz" * size])])
            out = outputs_of(link, message, frames)
            np.testing.assert_array_equal(out["OUT_FP32"], values)
            assert list(out["OUT_BYTES"]) == [b"a", b"", b"xyz" * size]
            link.release(response_slots(message))
        # Request slots are freed as soon as the answer arrives.
        assert router.arena.allocated_slots == 0
        # Released response slots wait for the next request to the worker, which carries them back.
        message, _ = await execute(router, link, [request(np.ones(300_000, dtype=np.float32), [b"x"])])
        link.release(response_slots(message))
        assert len(link.pending_free) == (2 if inline_max == 0 else 1)
        message, _ = await execute(router, link, [request(np.ones(1, dtype=np.float32), [b"x"])])
        assert len(link.pending_free) == 0
        link.release(response_slots(message))

    run_pair(inline_max, scenario)


def test_batch_of_requests_in_one_execution():
    async def scenario(router, link):
        batch = [request(np.full(4, i, dtype=np.float32), [str(i).encode()]) for i in range(5)]
        message, frames = await execute(router, link, batch)
        assert len(message.responses) == 5
        for i in range(5):
            assert outputs_of(link, message, frames, i)["OUT_FP32"].tolist() == [i] * 4

    run_pair(1 << 16, scenario)


def test_a_call_that_cannot_be_sent_raises_and_hears_nothing():
    async def scenario(router, link):
        other = router.add_link(b"nobody#0#1", "nobody_0_0")
        call = FutureCall()
        with pytest.raises(WorkerGoneError, match="not connected"):
            router.submit(other, [request(np.ones(4, dtype=np.float32), [b"a"])], call)
        router.drop_link(other, "gone")
        with pytest.raises(WorkerGoneError, match="not running"):
            router.submit(other, [request(np.ones(4, dtype=np.float32), [b"a"])], call)
        assert call.replies == 0 and call.gone is None and not other.pending

    run_pair(1 << 16, scenario)


def test_dropping_a_link_tells_each_pending_call_once_and_frees_its_request_slots():
    async def scenario(router, link):
        values = np.ones(300_000, dtype=np.float32)  # large: the request takes a slot of the request arena
        calls = [FutureCall() for _ in range(3)]
        for call in calls:
            router.submit(link, [request(values, [b"b"])], call)
        assert router.arena.allocated_slots == 6  # two inputs each
        router.drop_link(link, "stopped")
        assert [c.gone for c in calls] == ["stopped"] * 3
        assert router.arena.allocated_slots == 0
        for call in calls:
            with pytest.raises(WorkerGoneError):
                await call.future

    run_pair(0, scenario)


def test_an_answer_nobody_is_waiting_for_gives_its_slots_back():
    async def scenario(router, link):
        values = np.ones(300_000, dtype=np.float32)
        call = FutureCall()
        call_id = router.submit(link, [request(values, [b"a"])], call)
        _, slots = link.pending.pop(call_id)  # as if forgotten: the answer has no taker
        router._free_request_slots(slots)
        deadline = asyncio.get_running_loop().time() + 10
        while len(link.pending_free) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert len(link.pending_free) == 2 and call.replies == 0

    run_pair(0, scenario)
