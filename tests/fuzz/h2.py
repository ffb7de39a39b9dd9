"""HTTP/2 frames and HPACK header blocks: the bytes a gRPC client sends on one connection, read by the gRPC transport
(`frontend/grpc/h2.GrpcConnection`, HPACK by the `hpack` package under our limits) through a fake transport.

The transport's own errors are frames: RST_STREAM or GOAWAY with an RFC 9113 code, or a call ended with a gRPC status. A
finding is an exception out of `buffer_updated`, an error the connection logs (it answers those with GOAWAY
INTERNAL_ERROR), a frame with INTERNAL_ERROR, or output that is not frames. Each input is read twice, as one read and in
pieces of 1 to 256 bytes (`harness.read_sizes`), and the server must write the same frames both times. The event loop's
clock stands still (rate budgets and the ping policy see no time pass, timers do not fire), so a run is the same every
time. The limits are small, so that inputs reach them.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any, AsyncIterator, Iterator

from pytriton.frontend.h2 import connection as h2
from tests.frontend.http1._fake import FakeTransport
from tests.fuzz.harness import Finding, Harness, read_sizes

SERVICE = b"/inference.GRPCInferenceService/"
LIMITS = h2.H2Limits(max_concurrent_streams=8, max_header_list_size=4096, max_message_bytes=64 << 10,
                     max_decompressed_bytes=256 << 10, initial_window_size=65535, max_frame_size=16384,
                     max_pending_control_frames=64)
INTERNAL_ERROR = 2
GOAWAY, RST_STREAM = 7, 3


class _Transport(FakeTransport):
    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.closed = True


async def _echo(request: bytes, context: h2.Context) -> bytes:
    return bytes(request)


async def _empty(request: bytes, context: h2.Context) -> bytes:
    return b""


async def _stream(requests: AsyncIterator[bytes], context: h2.Context) -> AsyncIterator[bytes]:
    async for request in requests:
        yield bytes(request)


def _serialize(response: Any) -> list[Any]:
    return [response]


METHODS = {
    SERVICE + b"ModelInfer": h2.Method(_echo, bytes, _serialize, compress=True),
    SERVICE + b"ModelStreamInfer": h2.Method(_stream, bytes, _serialize, client_streaming=True, server_streaming=True),
    SERVICE + b"ServerLive": h2.Method(_empty, bytes, _serialize),
}


def frames(written: bytes) -> list[tuple[int, int, int, bytes]]:
    """The server's frames (type, flags, stream, payload) after its SETTINGS; a finding if it wrote anything else."""
    out, pos = [], 0
    while pos < len(written):
        if len(written) - pos < 9:
            raise Finding("output ends inside a frame header", repr(written[pos:]))
        high, low, ftype, flags, stream = struct.unpack_from(">HBBBL", written, pos)
        length = (high << 8) | low
        if pos + 9 + length > len(written):
            raise Finding("output ends inside a frame", f"frame type {ftype} of {length} bytes")
        payload = written[pos + 9 : pos + 9 + length]
        out.append((ftype, flags, stream, payload))
        pos += 9 + length
    return out


async def _settle() -> None:
    """Until the calls' tasks are done, and the callbacks they scheduled have run (the writes gathered in a turn)."""
    current = asyncio.current_task()
    for _ in range(100):
        await asyncio.sleep(0)
        if all(task is current for task in asyncio.all_tasks()):
            break
    for _ in range(2):
        await asyncio.sleep(0)


async def session(data: bytes, steps: Iterator[int]) -> list[tuple[int, int, int, bytes]]:
    connection = h2.GrpcConnection(METHODS, None, LIMITS)
    transport = _Transport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    pos = 0
    try:
        while pos < len(data) and not transport.is_closing():
            view = connection.get_buffer(-1)
            n = min(len(view), len(data) - pos, next(steps))
            view[:n] = data[pos : pos + n]
            connection.buffer_updated(n)
            del view
            pos += n
        await _settle()
    finally:
        transport.closed = True
        connection.connection_lost(None)
        await _settle()
    return frames(bytes(transport.written))


class H2Harness(Harness):
    name = "h2"
    max_len = 8192

    def setup(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.time = lambda: 1000.0  # type: ignore[method-assign]  # (see the module's docstring)

    def close(self) -> None:
        self.loop.close()

    def one_input(self, data: bytes) -> None:
        whole = self.loop.run_until_complete(session(data, itertools.repeat(len(data) or 1)))
        for ftype, _, stream, payload in whole:
            code = payload[4:8] if ftype == GOAWAY else payload[:4] if ftype == RST_STREAM else None
            if code is not None and int.from_bytes(code, "big") == INTERNAL_ERROR:
                raise Finding("INTERNAL_ERROR", f"{'GOAWAY' if ftype == GOAWAY else 'RST_STREAM'} on stream {stream}: "
                                                f"{payload[8:].decode('utf-8', 'replace')}")
        cut = self.loop.run_until_complete(session(data, read_sizes(data)))
        if whole != cut:
            first = next(i for i, (a, b) in enumerate(zip(whole + [None], cut + [None])) if a != b)  # type: ignore
            raise Finding("frames depend on how the reads fall",
                          f"frame {first}: one read {whole[first:first + 3]!r}\nin pieces: {cut[first:first + 3]!r}")
