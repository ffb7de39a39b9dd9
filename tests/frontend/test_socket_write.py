"""DirectWriteTransport on a real socket pair: order, flow-control signals, close and abort, no copy of large writes."""

from __future__ import annotations

import asyncio
import socket

import pytest

from pytriton.frontend._socket_write import HANDOFF, DirectWriteTransport

MIB = 1 << 20


class Recorder(asyncio.Protocol):
    """The server side's protocol: routes pause/resume through the writer, as the front-ends do."""

    def __init__(self, coalesce: bool = False) -> None:
        self.coalesce = coalesce
        self.writer: DirectWriteTransport | None = None
        self.events: list[str] = []
        self.largest_transport_buffer = 0
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.writer = DirectWriteTransport(transport, coalesce=self.coalesce)  # type: ignore[arg-type]
        transport.set_write_buffer_limits(high=0)  # type: ignore[attr-defined]

    def pause_writing(self) -> None:
        assert self.writer is not None
        self.largest_transport_buffer = max(self.largest_transport_buffer,
                                            self.writer.transport.get_write_buffer_size())
        if self.writer.paused():
            self.events.append("pause")

    def resume_writing(self) -> None:
        assert self.writer is not None
        if self.writer.resumed():
            self.events.append("resume")

    def connection_lost(self, exc: Exception | None) -> None:
        assert self.writer is not None
        self.writer.lost()
        self.lost.set_result(exc)


async def _pair(coalesce: bool = False) -> tuple[Recorder, socket.socket]:
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    _, protocol = await asyncio.get_running_loop().connect_accepted_socket(lambda: Recorder(coalesce), ours)
    return protocol, theirs


async def _read_all(sock: socket.socket, nbytes: int | None = None) -> bytes:
    """Read until `nbytes` arrived (or EOF when None), a little at a time like a slow client."""
    loop = asyncio.get_running_loop()
    out = bytearray()
    while nbytes is None or len(out) < nbytes:
        chunk = await asyncio.wait_for(loop.sock_recv(sock, 256 * 1024), 30)
        if not chunk:
            break
        out += chunk
    return bytes(out)


def test_large_writes_keep_their_order_and_are_not_copied_whole():
    async def main() -> None:
        protocol, peer = await _pair()
        writer = protocol.writer
        assert writer is not None
        tensor = bytearray(range(256)) * (20 * MIB // 256)  # 20 MiB
        second = bytes(reversed(tensor[: 3 * MIB]))
        writer.write(b"head")
        writer.write(memoryview(tensor))
        writer.write(b"middle")  # small, behind the tensor
        writer.write(second)
        writer.write(b"tail")
        expected = b"head" + bytes(tensor) + b"middle" + second + b"tail"
        assert writer.get_write_buffer_size() > 0  # 20 MiB cannot all be in the kernel already
        assert protocol.events == ["pause"]
        with pytest.raises(BufferError):  # the queue refers to the tensor itself (no copy of it was made)
            tensor.extend(b"x")
        got = await _read_all(peer, len(expected))
        assert got == expected
        await asyncio.sleep(0)  # the transport's last resume_writing runs
        for _ in range(100):
            if protocol.events == ["pause", "resume"]:
                break
            await asyncio.sleep(0.01)
        assert protocol.events == ["pause", "resume"]
        assert writer.get_write_buffer_size() == 0
        assert protocol.largest_transport_buffer <= HANDOFF + 64  # asyncio never held more than a slice
        tensor.extend(b"x")  # nothing refers to it any more
        writer.close()
        assert await _read_all(peer) == b""
        await asyncio.wait_for(protocol.lost, 10)
        peer.close()

    asyncio.run(main())


def test_close_and_eof_wait_for_the_queue():
    async def main() -> None:
        protocol, peer = await _pair()
        writer = protocol.writer
        assert writer is not None
        data = bytes(8 * MIB)
        writer.write(data)
        writer.write_eof()
        writer.close()
        assert writer.is_closing()
        assert not writer.transport.is_closing() or writer.get_write_buffer_size() == 0
        got = await _read_all(peer)  # everything, then EOF
        assert len(got) == len(data)
        await asyncio.wait_for(protocol.lost, 10)
        peer.close()

    asyncio.run(main())


def test_abort_lets_go_of_the_buffers():
    async def main() -> None:
        protocol, peer = await _pair()
        writer = protocol.writer
        assert writer is not None
        tensor = bytearray(16 * MIB)
        writer.write(memoryview(tensor))
        assert writer.get_write_buffer_size() > 0
        writer.abort()
        assert writer.get_write_buffer_size() == 0
        tensor.extend(b"x")  # no view of it is left
        await asyncio.wait_for(protocol.lost, 10)
        peer.close()

    asyncio.run(main())


def test_a_peer_that_goes_away_ends_the_connection():
    async def main() -> None:
        protocol, peer = await _pair()
        writer = protocol.writer
        assert writer is not None
        tensor = bytearray(16 * MIB)
        writer.write(memoryview(tensor))
        peer.close()  # with 16 MiB on the way: the next write fails
        await asyncio.wait_for(protocol.lost, 10)
        assert writer.get_write_buffer_size() == 0
        tensor.extend(b"x")

    asyncio.run(main())


class _NoSocketTransport(asyncio.Transport):
    """A transport without a plain socket (as TLS has): every write must reach it."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []

    def get_extra_info(self, name, default=None):
        return {"sslcontext": object(), "socket": None}.get(name, default)

    def write(self, data) -> None:
        self.written.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False


def test_without_a_plain_socket_everything_goes_to_the_transport():
    inner = _NoSocketTransport()
    writer = DirectWriteTransport(inner)
    writer.write(bytes(MIB))
    writer.write(b"x")
    assert [len(chunk) for chunk in inner.written] == [MIB, 1]
    assert writer.get_write_buffer_size() == 0


def _count_writes(writer: DirectWriteTransport) -> list[int]:
    sizes: list[int] = []
    write = writer.transport.write

    def counted(data) -> None:  # noqa: ANN001
        sizes.append(len(data))
        write(data)

    writer.transport.write = counted  # type: ignore[method-assign]
    return sizes


def test_coalesced_small_writes_of_one_turn_leave_together_in_order():
    """With `coalesce`, the small writes of one loop turn reach the transport as one write at the end of the turn;
    the caller's buffers are copied (they may be reused at once); the next turn's writes go in a write of their own."""
    async def main() -> None:
        protocol, peer = await _pair(coalesce=True)
        writer = protocol.writer
        assert writer is not None
        sizes = _count_writes(writer)
        reused = bytearray(b"A" * 100)
        pieces = [b"one", memoryview(reused), b"three" * 50, bytearray(b"four")]
        for piece in pieces:
            writer.write(piece)
        reused[:] = b"B" * 100  # the caller reuses its buffer right after the write
        assert sizes == []  # nothing handed over during the turn
        await asyncio.sleep(0)
        assert sizes == [3 + 100 + 250 + 4]
        writer.write(b"next turn")
        await asyncio.sleep(0)
        assert sizes == [357, 9]
        got = await _read_all(peer, 366)
        assert got == b"one" + b"A" * 100 + b"three" * 50 + b"four" + b"next turn"
        assert protocol.events == []  # everything went to the socket at once: no pause, no resume
        writer.close()
        await asyncio.wait_for(protocol.lost, 10)
        peer.close()

    asyncio.run(main())


def test_coalesced_writes_go_before_a_large_write_and_before_close():
    """A large write, `write_eof` and `close` hand over what the turn gathered first: the order is kept."""
    async def main() -> None:
        protocol, peer = await _pair(coalesce=True)
        writer = protocol.writer
        assert writer is not None
        tensor = bytes(range(256)) * (3 * MIB // 256)
        writer.write(b"head")
        writer.write(tensor)
        writer.write(b"tail")
        writer.write_eof()
        writer.close()
        got = await _read_all(peer)  # everything, then EOF
        assert got == b"head" + tensor + b"tail"
        await asyncio.wait_for(protocol.lost, 10)
        peer.close()

    asyncio.run(main())


def test_abort_drops_what_the_turn_gathered():
    async def main() -> None:
        protocol, peer = await _pair(coalesce=True)
        writer = protocol.writer
        assert writer is not None
        sizes = _count_writes(writer)
        writer.write(b"never sent")
        writer.abort()
        await asyncio.wait_for(protocol.lost, 10)
        assert sizes == []
        assert await _read_all(peer) == b""
        peer.close()

    asyncio.run(main())
