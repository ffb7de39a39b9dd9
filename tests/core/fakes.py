"""Fakes for the core's tests: a source of receive segments in ordinary memory."""

from __future__ import annotations


class FakeSource:
    """Segments in ordinary memory; records what was freed."""

    def __init__(self) -> None:
        self.made: dict[int, bytearray] = {}
        self.freed: list[int] = []

    def allocate(self, nbytes: int) -> tuple[str, int, memoryview]:
        handle = len(self.made) + 1
        self.made[handle] = bytearray(nbytes)
        return f"/pytriton_test_{handle}", handle, memoryview(self.made[handle])

    def free(self, handle: int) -> None:
        self.freed.append(handle)
