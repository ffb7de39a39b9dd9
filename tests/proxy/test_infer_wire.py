"""The INFER messages `ProxyRouter.submit` sends are byte for byte what protobuf serialises for the same execution
(proxy/infer_wire.py writes the common requests without protobuf objects); the worker reads them as before."""

from __future__ import annotations

import asyncio
import secrets
import tempfile
from typing import Any

import numpy as np
import pytest

from pytriton.proxy.infer_wire import varint
from pytriton.proxy.messages import FLAG_NOT_READY, FLAG_SEQUENCE_CONTROLS, RequestData, ServerToWorker, TensorData
from pytriton.proxy.router import PACK_MAX, ProxyRouter
from tests.proxy.protobuf_reference import SilentCall, reference_message


def _fp32(name: str, values: list[float] | np.ndarray, shape: tuple[int, ...] | None = None) -> TensorData:
    array = np.asarray(values, dtype=np.float32)
    return TensorData(name, "FP32", shape or array.shape, memoryview(array).cast("B"))


SMALL = RequestData([_fp32("INPUT", list(range(16)), (1, 16))], [], {})
NOT_READY = RequestData([], ["OUTPUT"], {}, [], "", 0, FLAG_SEQUENCE_CONTROLS | FLAG_NOT_READY)
NOT_READY_OTHER = RequestData([], [], {}, [], "", 0, FLAG_SEQUENCE_CONTROLS | FLAG_NOT_READY)
CASES: dict[str, list[RequestData]] = {
    "one small input": [SMALL],
    "a batch of small requests (offsets past 127 in the shared frame)": [SMALL] * 40,
    "inputs of several types, requested outputs": [RequestData(
        [_fp32("A", [1.0, 2.0]), TensorData("B", "BYTES", (2,), b"\x01\x00\x00\x00a\x01\x00\x00\x00b"),
         TensorData("C", "INT8", (3,), b"\x01\x02\x03")], ["OUT_A", "OUT_\u00e9"], {})],
    "an empty input": [RequestData([TensorData("E", "FP32", (0, 4), b"")], [], {})],
    "an input over the shared frame's limit, within the inline one": [RequestData(
        [_fp32("S", [0.5] * 4), _fp32("L", np.zeros(PACK_MAX // 4 + 8)), _fp32("T", [0.25] * 3)], [], {})],
    "a large shape (multi-byte varints)": [RequestData([TensorData("X", "UINT8", (1, 300), bytes(300))], [], {})],
    "request id, integer correlation id, flags": [RequestData([_fp32("I", [1.0])], [], {}, [], "req-\u00fc", 123456789,
                                                             3)],
    "a negative correlation id (an int64 the client sent)": [RequestData([_fp32("I", [1.0])], [], {}, [], "", -5, 1)],
    "a string correlation id": [RequestData([_fp32("I", [1.0])], [], {}, [], "", "seq-7", 2 | 16)],
    "parameters (through protobuf)": [RequestData([_fp32("I", [1.0])], [], {"a": 1, "b": "x", "c": True, "d": 0.5})],
    "an input in a client region (through protobuf)": [RequestData(
        [TensorData("R", "FP32", (4,), None, "/shm-key", 64, 16, 16, 7)], [], {})],
    "an output region (through protobuf)": [RequestData(
        [_fp32("I", [1.0])], [], {}, [TensorData("O", "", (), None, "/shm-key", 64, 0, 32, 7)])],
    "no inputs": [RequestData([], [], {}), RequestData([], ["O"], {})],
    "a shape given as a list": [
        RequestData([TensorData("L", "INT8", [1, 3], b"\x01\x02\x03")], [], {})],  # type: ignore[arg-type]
    "a mix of both kinds in one execution": [SMALL, RequestData([_fp32("I", [1.0])], ["O"], {"p": 2}), SMALL],
    "not-ready rows of a sequence batch (their item kept)": [NOT_READY, SMALL, NOT_READY, NOT_READY_OTHER],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("call_ids", [1, 200, 20000, 3_000_000])
def test_submit_matches_protobuf(case: str, call_ids: int) -> None:
    requests = CASES[case]

    async def main() -> None:
        with tempfile.TemporaryDirectory() as run_dir:
            router = ProxyRouter(f"ipc://{run_dir}/w.sock", secrets.token_hex(4), inline_max=4096)
            reference = ProxyRouter(f"ipc://{run_dir}/r.sock", secrets.token_hex(4), inline_max=4096)
            try:
                link = router.add_link(b"w", "m_0")
                sent: list[list[Any]] = []
                router._send = lambda _link, frames: sent.append(frames)  # type: ignore[method-assign]
                router._ids = iter(range(call_ids, call_ids + 10))  # type: ignore[assignment]
                for freed, window in (([], (0, 0)), ([5, 1 << 41], (0, 0)), ([], (4096, 16 << 20))):
                    link.pending_free.extend(freed)
                    call_id = router.submit(link, requests, SilentCall(), window)
                    header, *frames = sent.pop()
                    want, want_frames, want_slots = reference_message(reference, call_id, requests, freed, window)
                    assert header == want, case
                    assert [bytes(frame) for frame in frames] == [bytes(frame) for frame in want_frames]
                    assert link.pending[call_id][1] == want_slots
                    assert ServerToWorker.FromString(header) == ServerToWorker.FromString(want)
            finally:
                router.close()
                reference.close()

    asyncio.run(main())


def test_arena_input_goes_through_protobuf() -> None:
    """An input over the inline limit lies in the request arena: its slot is the call's until the final reply."""

    async def main() -> None:
        with tempfile.TemporaryDirectory() as run_dir:
            router = ProxyRouter(f"ipc://{run_dir}/w.sock", secrets.token_hex(4), inline_max=1024)
            try:
                link = router.add_link(b"w", "m_0")
                sent: list[list[Any]] = []
                router._send = lambda _link, frames: sent.append(frames)  # type: ignore[method-assign]
                big = np.arange(1024, dtype=np.float32)
                call_id = router.submit(link, [RequestData([_fp32("S", [1.0]), _fp32("BIG", big)], [], {})], SilentCall())
                message = ServerToWorker.FromString(sent[0][0])
                small, large = message.requests[0].inputs
                assert (small.frame, small.offset, small.nbytes) == (1, 0, 4)
                assert (large.frame, large.nbytes) == (0, big.nbytes)
                assert len(link.pending[call_id][1]) == 1
                view = router.arena._segments[large.segment].view[large.offset:large.offset + large.nbytes]
                assert bytes(view) == big.tobytes()
                view.release()
            finally:
                router.close()

    asyncio.run(main())


@pytest.mark.parametrize("value", [1, 127, 128, 300, 16383, 16384, 1 << 35, (1 << 64) - 1])
def test_varint(value: int) -> None:
    message = ServerToWorker(id=value)
    assert message.SerializeToString() == b"\x10" + varint(value)


def test_worker_reads_what_submit_wrote() -> None:
    """The worker's decode of these messages: each input's values, shape and dtype, as read-only arrays (those of the
    shared frame at their own offsets); requested outputs, request id, correlation id and flags as sent."""
    import os

    import zmq

    from pytriton.proxy._zmq import recv_frames
    from pytriton.proxy.endpoint import WorkerEndpoint

    requests = [SMALL, *CASES["inputs of several types, requested outputs"],
                *CASES["an input over the shared frame's limit, within the inline one"],
                *CASES["an empty input"], *CASES["request id, integer correlation id, flags"],
                *CASES["a string correlation id"], *CASES["parameters (through protobuf)"]]

    async def main() -> None:
        with tempfile.TemporaryDirectory() as run_dir:
            router = ProxyRouter(f"ipc://{run_dir}/w.sock", secrets.token_hex(4), inline_max=4096)
            endpoint = WorkerEndpoint(router.address, b"w", router.tag, os.getpid(), inline_max=4096)
            context = zmq.Context.instance()
            sender, receiver = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
            try:
                link = router.add_link(b"w", "m_0")
                sent: list[list[Any]] = []
                router._send = lambda _link, frames: sent.append(frames)  # type: ignore[method-assign]
                router.submit(link, requests, SilentCall())
                header, *frames = sent[0]
                receiver.bind(f"inproc://{router.tag}")
                sender.connect(f"inproc://{router.tag}")
                sender.send_multipart(frames)
                decoded, regions, failed = endpoint.decode(ServerToWorker.FromString(header), recv_frames(receiver))
                assert failed == [""] * len(requests) and regions is None
                for request, got in zip(requests, decoded):
                    assert list(got.data) == [tensor.name for tensor in request.inputs]
                    for tensor in request.inputs:
                        array = got.data[tensor.name]
                        assert array.shape == tuple(tensor.shape)
                        if tensor.datatype != "BYTES":  # (BYTES become an object array of their own)
                            assert not array.flags.writeable
                            assert array.tobytes() == bytes(tensor.data)
                    assert got.requested_output_names == (request.requested_outputs or None)
                    assert (got.request_id, got.correlation_id) == (request.request_id, request.correlation_id)
                    assert got.flags == request.flags & 3
                assert decoded[1].data["B"].tolist() == [b"a", b"b"]
                assert decoded[-1].parameters == {"a": 1, "b": "x", "c": True, "d": 0.5}
            finally:
                sender.close(0)
                receiver.close(0)
                endpoint.close()
                router.close()

    asyncio.run(main())


def test_not_ready_items_are_kept_per_request_object() -> None:
    """A not-ready row's item is written once per RequestData the supervisor keeps; another object gets its own."""
    from pytriton.proxy import infer_wire

    infer_wire._NOT_READY_ITEMS.clear()
    rows = [RequestData([], outputs, {}, [], "", 0, FLAG_SEQUENCE_CONTROLS | FLAG_NOT_READY)
            for outputs in (["A"], ["B", "C"], [])]
    for _ in range(2):
        for row in rows:
            item = infer_wire.inline_item(row, [], [0, [], 0], PACK_MAX, 4096)
            want = ServerToWorker()
            want.requests.add(requested_outputs=row.requested_outputs, flags=row.flags)
            assert item == want.requests[0].SerializeToString()
    assert len(infer_wire._NOT_READY_ITEMS) == 3
    for index in range(70):  # (bounded)
        infer_wire.inline_item(RequestData([], [str(index)], {}, [], "", 0, FLAG_NOT_READY), [], [0, [], 0], 64, 64)
    assert 0 < len(infer_wire._NOT_READY_ITEMS) <= 64
