"""The BLS path between a worker's endpoint and the router (`BlsBridge`), in one process with a stand-in for the
core: every shared-memory slot lent either way comes back, whether the call succeeds, fails, is abandoned by the
worker, or its worker goes away while it runs."""

from __future__ import annotations

import asyncio
import os
import secrets
import tempfile
import threading

import numpy as np

from pytriton.core.types import InferRequest, InferResponse, Tensor
from pytriton.exceptions import not_found
from pytriton.proxy.arena import our_segments
from pytriton.proxy.endpoint import WorkerEndpoint
from pytriton.proxy.router import ProxyRouter
from pytriton.supervisor.bls import BlsBridge

BIG = 1 << 18  # float32 elements: 1 MiB, past the inline limit
HANGING: list[str] = []
"""The "hangs" requests that reached the stand-in core (cleared by each test that sends one)."""


async def echo(request: InferRequest) -> InferResponse:
    """Stand-in for ServerCore.infer: answers each input as an output of the same name (a copy)."""
    if request.model_name == "missing":
        raise not_found("Request for unknown model: 'missing' is not found")
    if request.model_name == "hangs":
        HANGING.append(request.model_name)  # the test waits for this: the request runs
        await asyncio.sleep(3600)
    return InferResponse(request.model_name, "1", "", [Tensor(t.name, t.datatype, t.shape, bytes(t.data))
                                                        for t in request.inputs])


async def stream(request: InferRequest, errors_inline: bool = False):
    for value in range(3):
        yield InferResponse(request.model_name, "1", "", [Tensor("OUT", "INT32", (1,), np.int32(value).tobytes())])


def run(scenario):
    async def main():
        tag = secrets.token_hex(4)
        with tempfile.TemporaryDirectory() as run_dir:
            router = ProxyRouter(f"ipc://{run_dir}/w.sock", tag)
            BlsBridge(router, echo, stream)
            link = router.add_link(b"caller#0", "caller_0")
            endpoint = WorkerEndpoint(router.address, b"caller#0", tag, os.getpid())
            loop = asyncio.get_running_loop()
            endpoint.send_hello()
            await asyncio.wait_for(link.hello, 10)
            try:
                await scenario(loop, router, link, endpoint)
            finally:
                endpoint.close()
                router.close()
            assert list(our_segments(tag)) == []

    asyncio.run(main())


def call(endpoint: WorkerEndpoint, model: str, inputs, decoupled: bool = False) -> list:
    """Blocking, in a thread: send a BLS request and read its answers until the final one."""
    call_id = endpoint.bls_send(model, "", inputs, [], {}, decoupled)
    answers = []
    while True:
        got = endpoint.bls_poll(call_id, 100)
        if got is None:
            continue
        message, frames = got
        answers.append((message.error, message.error_code, endpoint.bls_read(message, frames)[0]))
        if message.final:
            return answers


async def until(condition, what: str, timeout_s: float = 10.0) -> None:
    """Until `condition()` holds, letting the loop run (the router reads the worker's messages on it); fails naming
    `what` when `timeout_s` passes first: an event waited for, not a guessed pause."""
    deadline = loop_time() + timeout_s
    while not condition():
        assert loop_time() < deadline, f"gave up after {timeout_s:.0f} s waiting for: {what}"
        await asyncio.sleep(0.005)


def loop_time() -> float:
    return asyncio.get_running_loop().time()


async def settle(router: ProxyRouter, link) -> None:
    """Until the worker's last FREE has reached the router: every slot the router lent is back."""
    await until(lambda: router.arena.allocated_slots == 0 and not link.bls_slots, "the router's slots given back")


def test_large_tensors_both_ways_and_every_slot_comes_back():
    async def scenario(loop, router, link, endpoint):
        a = np.arange(BIG, dtype=np.float32)
        for _ in range(5):
            [(error, _, outputs)] = await loop.run_in_executor(None, call, endpoint, "echo", [("A", "FP32", a)])
            assert error == ""
            assert outputs[0][0] == "A"
            np.testing.assert_array_equal(outputs[0][1], a)
        await settle(router, link)
        assert router.arena.allocated_slots == 0  # the answers' slots: given back by the worker
        assert not link.bls_slots
        # the inputs' slots ride back to the worker on the answers; the last ones on the last answer
        assert endpoint.arena.allocated_slots == 0

    run(scenario)


def test_bytes_tensors_both_ways():
    async def scenario(loop, router, link, endpoint):
        words = np.array([b"a", b"", "é".encode(), b"x" * 100_000], dtype=np.object_)
        [(error, _, outputs)] = await loop.run_in_executor(None, call, endpoint, "echo", [("W", "BYTES", words)])
        assert error == ""
        assert outputs[0][1].tolist() == words.tolist()
        await settle(router, link)
        assert router.arena.allocated_slots == 0 and endpoint.arena.allocated_slots == 0

    run(scenario)


def test_an_error_answers_with_its_code_and_frees_the_inputs():
    async def scenario(loop, router, link, endpoint):
        a = np.ones(BIG, dtype=np.float32)
        [(error, code, outputs)] = await loop.run_in_executor(None, call, endpoint, "missing", [("A", "FP32", a)])
        # (Triton's stub's words for a model it cannot reach; the core's code rides along, the worker answers INTERNAL)
        assert (error, code, outputs) == ("Failed for execute the inference request. Model 'missing' is not ready.", 2, [])
        assert endpoint.arena.allocated_slots == 0

    run(scenario)


def test_a_stream_comes_back_response_by_response_then_final():
    async def scenario(loop, router, link, endpoint):
        answers = await loop.run_in_executor(None, call, endpoint, "s", [("IN", "INT32", np.ones(3, np.int32))],
                                             True)
        assert [[int(array[0]) for _, array in outputs] for _, _, outputs in answers] == [[0], [1], [2], []]

    run(scenario)


def test_an_abandoned_call_gives_back_what_comes_for_it():
    async def scenario(loop, router, link, endpoint):
        a = np.ones(BIG, dtype=np.float32)

        def abandon():
            call_id = endpoint.bls_send("echo", "", [("A", "FP32", a)], [], {}, False)
            endpoint.bls_abandon(call_id)
            # answers come in order: once the next call's has come, the abandoned one's was read and given back
            [(error, _, _)] = call(endpoint, "echo", [("B", "FP32", a)])
            assert error == ""

        await loop.run_in_executor(None, abandon)
        await settle(router, link)
        assert router.arena.allocated_slots == 0
        assert not link.bls_slots

    run(scenario)


def test_a_caller_that_goes_away_mid_call_cancels_it():
    async def scenario(loop, router, link, endpoint):
        a = np.ones(BIG, dtype=np.float32)
        HANGING.clear()
        endpoint.bls_send("hangs", "", [("A", "FP32", a)], [], {}, False)
        await until(lambda: HANGING, "the request runs")
        bridge_tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert bridge_tasks
        router.drop_link(link, "the worker died")
        await until(lambda: all(t.done() for t in bridge_tasks), "the call's tasks end")
        assert all(t.cancelled() for t in bridge_tasks)  # withdrawn
        assert router.arena.allocated_slots == 0

    run(scenario)
