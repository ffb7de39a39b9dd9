"""Worker side: the arena segments a request's inputs lie in, mapped read-only: the server's request arena, and other
workers' response arenas (an ensemble step's output handed to the next step without a copy, a BLS call's input).

Mappings are opened on first use and cached per owner. A dedicated (single-tensor) segment is dropped once the
execution that used it has ended; every mapping of an owner that has died is dropped when a new owner is first met
(so that a restarted worker's unlinked segments do not stay mapped here).
"""

from __future__ import annotations

from typing import Any

from pytriton.proxy.arena import SegmentMap, is_dedicated, pid_alive
from pytriton.proxy.regions import RegionError


class InputSegments:
    """The segments of the server's request arena and of other workers' response arenas this worker has mapped."""

    def __init__(self, tag: str, server_pid: int):
        self.tag = tag
        self.server = SegmentMap(tag, server_pid, "req")
        self._peers: dict[tuple[int, str], SegmentMap] = {}
        self._dedicated_in_use: list[tuple[SegmentMap, int]] = []

    def _peer(self, pid: int, kind: str) -> SegmentMap:
        segments = self._peers.get((pid, kind))
        if segments is None:
            for owner in [key for key in self._peers if not pid_alive(key[0])]:
                self._peers.pop(owner).close()
            segments = self._peers[(pid, kind)] = SegmentMap(self.tag, pid, kind)
        return segments

    def view(self, ref: Any) -> memoryview:
        """A read-only view of the input `ref` names: in another worker's arena when it has `peer_pid`, else in the
        server's request arena."""
        if not ref.peer_pid:
            return self._view(self.server, ref)
        try:
            return self._view(self._peer(ref.peer_pid, ref.peer_arena), ref)
        except (OSError, ValueError) as exc:  # e.g. the worker that wrote it died and its segments were removed
            raise RegionError(f"input '{ref.name}' is gone from the shared memory of the model instance that produced "
                              f"it (pid {ref.peer_pid}): {exc}") from None

    def _view(self, segments: SegmentMap, ref: Any) -> memoryview:
        view = segments.view(ref.segment, ref.offset, ref.nbytes)
        if is_dedicated(ref.segment):
            self._dedicated_in_use.append((segments, ref.segment))
        return view

    def release_dedicated(self) -> None:
        """The execution that used them has ended: drop the mappings of dedicated segments."""
        for segments, segment_id in self._dedicated_in_use:
            segments.release_dedicated(segment_id)
        self._dedicated_in_use.clear()

    def close(self) -> None:
        self.server.close()
        for segments in self._peers.values():
            segments.close()
        self._peers.clear()
        self._dedicated_in_use.clear()
