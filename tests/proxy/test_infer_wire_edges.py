"""Attacks on the INFER header written without protobuf (proxy/infer_wire.py): edge cases compared byte for byte
with protobuf's serialisation of the same execution, and read back by the worker's decoder as sent."""

from __future__ import annotations

import asyncio
import secrets
import tempfile
from typing import Any

import numpy as np
import pytest

from pytriton.proxy.messages import RequestData, ServerToWorker, TensorData
from pytriton.proxy.router import PACK_MAX, ProxyRouter
from tests.proxy.protobuf_reference import SilentCall, reference_message


def _t(name: str, shape: tuple[int, ...], dtype: str = "INT8") -> TensorData:
    size = int(np.prod(shape, dtype=np.int64)) * (1 if dtype in ("INT8", "BOOL") else 4)
    return TensorData(name, dtype, shape, memoryview(bytes(range(256)) * (size // 256 + 1))[:size])


LONG = "n" * 300
CASES: dict[str, list[RequestData]] = {
    "a 0-d input": [RequestData([_t("S", ())], [], {})],
    "0-d and empty inputs side by side": [RequestData([_t("S", ()), _t("E", (0,)), _t("E2", (3, 0, 2)),
                                                       _t("S2", (), "FP32")], ["O"], {})],
    "unicode names everywhere": [RequestData([_t("\u00e9\u4e2d\U0001f600", (2,))], ["\U0001f600", ""], {}, [],
                                             "\u4e2d" * 50, "\u00e9", 1)],
    "a name past 127 bytes (TensorRef over 127 bytes)": [RequestData([_t(LONG, (1,))], [LONG], {}, [], LONG)],
    "200 inputs (an item past 127 bytes, offsets past 16383)": [
        RequestData([_t(f"I{index}", (97,)) for index in range(200)], [], {})],
    "inputs at and around the shared frame's limit": [RequestData(
        [_t("A", (PACK_MAX,)), _t("B", (PACK_MAX + 1,)), _t("C", (PACK_MAX - 1,)), _t("D", (1,))], [], {})],
    "the largest uint64 correlation id": [RequestData([_t("I", (1,))], [], {}, [], "", (1 << 64) - 1, 3)],
    "a correlation id of 2**63 and of INT64_MIN": [RequestData([_t("I", (1,))], [], {}, [], "", 1 << 63, 1),
                                                  RequestData([_t("I", (1,))], [], {}, [], "", -(1 << 63), 2)],
    "a correlation id past 64 bits (wraps to 0, as protobuf's path masks)": [
        RequestData([_t("I", (1,))], [], {}, [], "", 1 << 64, 0)],
    "large flags and a huge shape dimension": [RequestData(
        [TensorData("H", "INT8", (1 << 40, 0), b"")], [], {}, [], "", 0, (1 << 31) - 1)],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("call_id", [1, 127, 128, (1 << 63) - 1, (1 << 64) - 1])
def test_edge_cases_match_protobuf(case: str, call_id: int) -> None:
    requests = CASES[case]

    async def main() -> None:
        with tempfile.TemporaryDirectory() as run_dir:
            router = ProxyRouter(f"ipc://{run_dir}/w.sock", secrets.token_hex(4), inline_max=1 << 20)
            reference = ProxyRouter(f"ipc://{run_dir}/r.sock", secrets.token_hex(4), inline_max=1 << 20)
            try:
                link = router.add_link(b"w", "m_0")
                sent: list[list[Any]] = []
                router._send = lambda _link, frames: sent.append(frames)  # type: ignore[method-assign]
                router._ids = iter([call_id])  # type: ignore[assignment]
                got = router.submit(link, requests, SilentCall(), (0, 0))
                assert got == call_id
                header, *frames = sent.pop()
                want, want_frames, _slots = reference_message(reference, call_id, requests, [], (0, 0))
                assert header == want, case
                assert [bytes(f) for f in frames] == [bytes(f) for f in want_frames]
                message = ServerToWorker.FromString(header)
                assert message.id == call_id and len(message.requests) == len(requests)
                for item, request in zip(message.requests, requests):
                    assert [i.name for i in item.inputs] == [t.name for t in request.inputs]
                    assert [tuple(i.shape) for i in item.inputs] == [tuple(t.shape) for t in request.inputs]
                    for ref, tensor in zip(item.inputs, request.inputs):
                        frame = bytes(frames[ref.frame - 1])
                        assert frame[ref.offset:ref.offset + ref.nbytes] == bytes(tensor.data)
            finally:
                router.close()
                reference.close()

    asyncio.run(main())
