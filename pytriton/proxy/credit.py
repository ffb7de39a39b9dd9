"""The credit of a streaming call: how far a worker may run ahead of the consumers of its responses."""

from __future__ import annotations

import collections


class StreamCredit:
    """How far one streaming call may run ahead of its consumers: at most `window` responses sent and not yet
    taken, and (once one is out) at most `window_bytes` of their outputs; 0 is no limit. The server reports what
    was taken (CREDIT messages, a running total)."""

    __slots__ = ("bytes_ahead", "call_id", "consumed", "sent", "sizes", "window", "window_bytes")

    def __init__(self, call_id: int, window: int, window_bytes: int):
        self.call_id = call_id
        self.window = window
        self.window_bytes = window_bytes
        self.sent = 0
        self.consumed = 0
        self.sizes: collections.deque[int] = collections.deque()  # of the responses sent and not taken yet
        self.bytes_ahead = 0

    def on_sent(self, nbytes: int) -> bool:
        """Count one response sent; False once the stream must wait for credit before it sends another."""
        self.sent += 1
        if self.sent > self.consumed:  # (not taken already: credit may come early)
            self.sizes.append(nbytes)
            self.bytes_ahead += nbytes
        return not self.blocked

    def on_consumed(self, consumed: int) -> None:
        for _ in range(min(consumed, self.sent) - self.consumed):
            self.bytes_ahead -= self.sizes.popleft()
        self.consumed = max(self.consumed, consumed)

    @property
    def blocked(self) -> bool:
        ahead = self.sent - self.consumed
        if self.window and ahead >= self.window:
            return True
        return bool(self.window_bytes) and ahead > 0 and self.bytes_ahead >= self.window_bytes


__all__ = ["StreamCredit"]
