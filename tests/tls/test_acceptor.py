"""The TLS acceptor in one event loop: what arrives between the handshake's end and the protocol's making is handed
over in order (to a buffered protocol through small buffers); a failed handshake is reported to the log and its
connection closed; stopping cancels handshakes in progress."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl

import pytest

from pytriton.config.tls import TlsSettings
from pytriton.frontend.tls import HandshakeLog, TlsAcceptor, _Pending, server_context
from tests.tls.certs import Certs, make_certs


class Recorder(asyncio.BufferedProtocol):
    def __init__(self, eof_keeps_open: bool = False) -> None:
        self.transport = None
        self.paused = False
        self.empty_pauses = 0
        self.answering = False
        self.events: list = []
        self.received = bytearray()
        self.eof_keeps_open = eof_keeps_open
        self._buffer = bytearray(3)  # smaller than what arrives: the hand-over must loop

    def connection_made(self, transport) -> None:
        self.events.append("made")
        if not isinstance(transport, FakeTransport):  # as our front-ends do:
            self.transport = transport
            transport.set_write_buffer_limits(high=0)  # paused while the transport holds unsent bytes

    def pause_writing(self) -> None:
        self.paused = True
        if self.answering and not self.transport.get_write_buffer_size():
            self.empty_pauses += 1  # "paused" with nothing unsent: a wrong signal to our front-ends

    def resume_writing(self) -> None:
        self.paused = False

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self._buffer)

    def buffer_updated(self, nbytes: int) -> None:
        self.received += self._buffer[:nbytes]
        if self.transport is not None and self.received.endswith(b"bytes"):  # answered later, as a model does
            loop = asyncio.get_running_loop()
            self.answering = True
            loop.call_soon(self.transport.write, b"ans")
            loop.call_soon(self.transport.write, b"wer")

    def eof_received(self) -> bool:
        self.events.append("eof")
        return self.eof_keeps_open

    def connection_lost(self, exc) -> None:
        self.events.append("lost")


class FakeTransport:
    def __init__(self) -> None:
        self.protocol = None
        self.closed = False

    def set_protocol(self, protocol) -> None:
        self.protocol = protocol

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return 16384, 65536

    def close(self) -> None:
        self.closed = True


def test_pending_data_and_eof_handed_over_in_order():
    pending = _Pending()
    pending.data_received(b"hello ")
    pending.data_received(b"world")
    pending.eof_received()
    protocol, transport = Recorder(), FakeTransport()
    pending.hand_over(protocol, transport)
    assert protocol.events == ["made", "eof"]
    assert bytes(protocol.received) == b"hello world"
    assert transport.protocol is protocol
    assert transport.closed  # the protocol did not keep the connection open after EOF
    pending.connection_lost(None)  # (scheduled before the hand-over): the protocol is told
    assert protocol.events == ["made", "eof", "lost"]


class Growing(Recorder):
    """A buffered protocol whose buffer grows while data arrives (as an HTTP body received straight into its own
    buffer): resizing it fails while a view of it is still held."""

    def __init__(self) -> None:
        super().__init__()
        self._buffer = bytearray()
        self._used = 0

    def get_buffer(self, sizehint: int) -> memoryview:
        self._buffer.extend(bytes(4))  # BufferError if the previous view was not released
        return memoryview(self._buffer)[self._used:]

    def buffer_updated(self, nbytes: int) -> None:
        self._used += nbytes
        self.received[:] = self._buffer[:self._used]


def test_hand_over_to_a_protocol_whose_buffer_grows():
    pending = _Pending()
    pending.data_received(b"a request body that arrived with the handshake")
    protocol, transport = Growing(), FakeTransport()
    pending.hand_over(protocol, transport)
    assert bytes(protocol.received) == b"a request body that arrived with the handshake"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_handshakes_in_one_loop(certs, caplog):
    context = server_context(TlsSettings(certs.server_pem, certs.server_key, certs.ca_pem, mutual=True), ["h2"])
    made: list[Recorder] = []

    def factory() -> Recorder:
        made.append(Recorder(eof_keeps_open=True))
        return made[-1]

    async def main() -> None:
        acceptor = TlsAcceptor(context, 5.0, "test port", HandshakeLog())
        server = await asyncio.get_running_loop().create_server(acceptor.wrap(factory), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        # no client certificate: refused, logged, no protocol made
        client = ssl.create_default_context(cafile=certs.ca_pem)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        writer.write(b"x")
        try:  # TLS 1.3: the refusal (an alert, then the close) arrives after the client's Finished
            assert await asyncio.wait_for(reader.read(1), 5) == b""
        except (ssl.SSLError, ConnectionError):
            pass
        writer.close()
        # the right certificate: the request sent with the handshake reaches the protocol
        client.load_cert_chain(certs.client_pem, certs.client_key)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        writer.write(b"request bytes")
        await writer.drain()
        assert await asyncio.wait_for(reader.readexactly(6), 5) == b"answer"
        assert not made[0].paused  # everything written was sent: the protocol is not left paused
        assert made[0].empty_pauses == 0
        writer.close()
        # a silent plain connection: its handshake is in progress until the acceptor closes
        silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(100):
            if acceptor.pending:
                break
            await asyncio.sleep(0.02)
        assert len(acceptor.pending) == 1
        acceptor.close()
        assert await asyncio.wait_for(silent_reader.read(1), 5) == b""
        silent_writer.close()
        server.close()
        await server.wait_closed()

    with caplog.at_level(logging.WARNING, logger="pytriton.frontend"):
        asyncio.run(main())
    assert len(made) == 1 and bytes(made[0].received) == b"request bytes"
    assert made[0].events[0] == "made"
    failures = [r.getMessage() for r in caplog.records if "TLS handshake" in r.getMessage()]
    assert len(failures) == 1, failures
    assert failures[0].startswith("test port: TLS handshake with 127.0.0.1:")
    assert "the client sent no certificate" in failures[0]


def test_bytes_read_before_the_handshake_began_reach_it(certs):
    """(Python 3.10: a pause in connection_made does not hold, and the ClientHello may be read by the plain
    protocol.) Bytes the plain protocol got are handed to the TLS protocol, before anything read later."""
    context = server_context(TlsSettings(certs.server_pem, certs.server_key), ["h2"])
    made: list[Recorder] = []

    def factory() -> Recorder:
        made.append(Recorder())
        return made[-1]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server_sock, client_sock = socket.socketpair()
        client_sock.setblocking(False)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        client = ssl.create_default_context(cafile=certs.ca_pem).wrap_bio(incoming, outgoing,
                                                                          server_hostname="127.0.0.1")
        with pytest.raises(ssl.SSLWantReadError):
            client.do_handshake()
        hello = outgoing.read()
        acceptor = TlsAcceptor(context, 5.0, "test port")
        accept = acceptor.wrap(factory)()
        connection_made = accept.connection_made

        def made_then_read(transport) -> None:  # as if the transport had read the hello before the task ran
            connection_made(transport)
            accept.data_received(hello)

        accept.connection_made = made_then_read
        await loop.connect_accepted_socket(lambda: accept, server_sock)
        while True:
            incoming.write(await asyncio.wait_for(loop.sock_recv(client_sock, 65536), 5))
            try:
                client.do_handshake()
                break
            except ssl.SSLWantReadError:
                await loop.sock_sendall(client_sock, outgoing.read())
        client.write(b"request bytes")  # with the client's Finished
        await loop.sock_sendall(client_sock, outgoing.read())
        answer = b""
        while len(answer) < 6:
            incoming.write(await asyncio.wait_for(loop.sock_recv(client_sock, 65536), 5))
            try:
                while len(answer) < 6:  # (one record at a time)
                    answer += client.read(6)
            except ssl.SSLWantReadError:
                pass
        assert answer == b"answer"
        client_sock.close()
        acceptor.close()

    asyncio.run(main())
    assert len(made) == 1 and bytes(made[0].received) == b"request bytes"
