"""The INFER message as the router built it before proxy/infer_wire.py (every field through protobuf), to compare the
fast writer's bytes with (tests/proxy/test_infer_wire.py, test_infer_wire_edges.py)."""

from __future__ import annotations

from typing import Any

from pytriton.proxy.messages import RequestData, ServerToWorker
from pytriton.proxy.router import ProxyRouter


class SilentCall:
    """A router Call that ignores its replies."""

    def on_reply(self, message: Any, frames: Any) -> None: ...

    def on_gone(self, reason: str) -> None: ...


def reference_message(router: ProxyRouter, call_id: int, requests: list[RequestData], freed: list[int],
               window: tuple[int, int]) -> tuple[bytes, list[Any], list[int]]:  # fmt: skip
    """The message as the router built it before infer_wire: every field through protobuf."""
    message = ServerToWorker(kind=ServerToWorker.INFER, id=call_id)
    if window[0]:
        message.window, message.window_bytes = window
    frames: list[Any] = []
    slots: list[int] = []
    pack: list[Any] = [0, [], 0]
    for request in requests:
        router.fill_item(request, message.requests.add(), frames, slots, pack)
    if pack[0]:
        frames[pack[0] - 1] = b"".join(pack[1])
    message.freed.extend(freed)
    return message.SerializeToString(), frames, slots
