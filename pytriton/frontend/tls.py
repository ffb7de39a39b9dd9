"""TLS for the front-ends' ports (their settings: `pytriton.config.tls`): the server's `ssl.SSLContext`, and the handshake in front of a
connection's protocol (gRPC over `h2`, HTTP/1.1).

A connection is accepted as plain TCP and its handshake run with `loop.start_tls` (bounded by the port's header
timeout); only once it is done is the front-end's protocol made and handed the encrypted transport. A handshake
that fails (no client certificate, one from another CA, a plain-text client, a timeout) closes that connection
alone and is logged at most once per client address per `HandshakeLog.period_s`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any, cast

from pytriton.config.tls import TlsError, TlsSettings

logger = logging.getLogger("pytriton.frontend")


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise TlsError(f"cannot read the {what} '{path}': {exc.strerror or exc}") from None


def read_pem(settings: TlsSettings) -> tuple[bytes, bytes, bytes | None]:
    """The certificate, key and (mutual TLS) root certificate files' contents, checked to be PEM of the right kind."""
    cert = _read(settings.server_cert, "server certificate")
    if b"-----BEGIN CERTIFICATE-----" not in cert:
        raise TlsError(f"the server certificate '{settings.server_cert}' holds no PEM certificate")
    key = _read(settings.server_key, "server key")
    if b"PRIVATE KEY-----" not in key:
        raise TlsError(f"the server key '{settings.server_key}' holds no PEM private key")
    root = None
    if settings.mutual:
        root = _read(settings.root_cert, "root certificate")
        if b"-----BEGIN CERTIFICATE-----" not in root:
            raise TlsError(f"the root certificate '{settings.root_cert}' holds no PEM certificate")
    return cert, key, root


def server_context(settings: TlsSettings, alpn: list[str]) -> ssl.SSLContext:
    """A server context for `settings`: TLS 1.2 or later, the certificate and key loaded (now, so that a bad file
    fails the start), client certificates required and verified when mutual, `alpn` offered. Raises TlsError."""
    read_pem(settings)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(settings.server_cert, settings.server_key)
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise TlsError(f"the server key '{settings.server_key}' does not match the server certificate "
                           f"'{settings.server_cert}'") from None
        raise TlsError(f"cannot load the server certificate '{settings.server_cert}' with the key "
                       f"'{settings.server_key}': {exc}") from None
    except OSError as exc:
        raise TlsError(f"cannot load the server certificate '{settings.server_cert}' with the key "
                       f"'{settings.server_key}': {exc}") from None
    if settings.mutual:
        try:
            context.load_verify_locations(cafile=settings.root_cert)
        except (ssl.SSLError, OSError) as exc:
            raise TlsError(f"cannot load the root certificate '{settings.root_cert}': {exc}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    context.set_alpn_protocols(alpn)
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"client certificate rejected: {exc.verify_message or exc.reason}"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or str(exc)
        if reason in ("HTTP_REQUEST", "WRONG_VERSION_NUMBER", "UNSUPPORTED_PROTOCOL", "RECORD_LAYER_FAILURE"):
            return f"{reason} (a client speaking plain text or an old TLS version to this TLS port?)"
        if reason in ("PEER_DID_NOT_RETURN_A_CERTIFICATE", "NO_CERTIFICATE_RETURNED"):
            return f"{reason} (mutual TLS: the client sent no certificate)"
        return reason
    return str(exc) or type(exc).__name__


class HandshakeLog:
    """Logs failed handshakes at most once per client address per `period_s` (a client retrying in a loop must not
    flood the log); it remembers at most `max_peers` addresses."""

    def __init__(self, period_s: float = 60.0, max_peers: int = 4096, clock: Callable[[], float] = time.monotonic):
        self.period_s = period_s
        self.max_peers = max_peers
        self.clock = clock
        self._last: dict[str, float] = {}

    def failed(self, port: str, host: str, peer: str, exc: BaseException) -> bool:
        """Log the failure unless `host` was logged within the period; True when it was logged."""
        now = self.clock()
        last = self._last.get(host)
        if last is not None and now - last < self.period_s:
            return False
        if len(self._last) >= self.max_peers:
            self._last = {h: t for h, t in self._last.items() if now - t < self.period_s}
            if len(self._last) >= self.max_peers:
                return False  # a flood from many addresses: they stay unlogged until the period passes
        self._last[host] = now
        logger.warning("%s: TLS handshake with %s failed: %s (further failures from %s are not logged for %g s)",
                       port, peer, _reason(exc), host, self.period_s)
        return True


class TlsAcceptor:
    """Runs the TLS handshake of each connection of a port, then makes its protocol. Owns the handshakes in
    progress (`close` cancels them, which closes their connections)."""

    def __init__(self, context: ssl.SSLContext, handshake_timeout_s: float, port: str,
                 log: HandshakeLog | None = None):  # fmt: skip
        self.context = context
        self.handshake_timeout_s = handshake_timeout_s
        self.port = port  # in the log line, e.g. "gRPC port 8001"
        self.log = log or HandshakeLog()
        self.pending: set[asyncio.Task[Any]] = set()

    def wrap(self, factory: Callable[[], asyncio.BaseProtocol]) -> Callable[[], asyncio.BaseProtocol]:
        """A protocol factory for the listening socket: each connection's handshake, then `factory()`'s protocol."""
        return lambda: _Accept(self, factory)

    def close(self) -> None:
        for task in list(self.pending):
            task.cancel()


class _Accept(asyncio.Protocol):
    """A connection's plain TCP until `start_tls` takes it over."""

    def __init__(self, acceptor: TlsAcceptor, factory: Callable[[], asyncio.BaseProtocol]):
        self.acceptor = acceptor
        self.factory = factory
        self.lost = False
        self.early = bytearray()  # what was read before the handshake began (Python 3.10 only, see _handshake)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.pause_reading()  # type: ignore[attr-defined]  # the handshake reads it (start_tls resumes)
        task = asyncio.get_running_loop().create_task(self._handshake(transport))
        self.acceptor.pending.add(task)
        task.add_done_callback(self.acceptor.pending.discard)

    def data_received(self, data: bytes) -> None:
        self.early += data

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True

    async def _handshake(self, transport: Any) -> None:
        loop = asyncio.get_running_loop()
        try:
            # On Python 3.10 a pause in connection_made does not hold (the transport adds its reader after it) and
            # the ClientHello may have been read: pause for certain, let reads already queued land in `early`.
            transport.resume_reading()
            transport.pause_reading()
            await asyncio.sleep(0)
            if self.lost:
                return
            handshake = asyncio.ensure_future(loop.start_tls(
                transport, _Pending(), self.acceptor.context, server_side=True,
                ssl_handshake_timeout=self.acceptor.handshake_timeout_s,
            ))
            if self.early:
                # start_tls's first step sets the TLS protocol on the transport and queues its connection_made and
                # the resumption of reading; what was read early goes to it right after those, before any new read.
                await asyncio.sleep(0)
                loop.call_soon(self._feed_early, transport)
            tls_transport = await handshake
        except asyncio.CancelledError:
            transport.abort()
            raise
        except Exception as exc:  # noqa: BLE001 - any failed handshake closes this connection only
            transport.abort()
            self._failed(transport, exc)
            return
        pending = tls_transport.get_protocol() if tls_transport is not None else None
        if tls_transport is None or not isinstance(pending, _Pending) or pending.lost:
            return
        try:
            pending.hand_over(self.factory(), tls_transport, transport)
        except Exception:  # noqa: BLE001 - a protocol that fails on what came with the handshake: this connection only
            logger.exception("%s: the connection from %s failed as it began", self.acceptor.port,
                             tls_transport.get_extra_info("peername"))
            tls_transport.abort()

    def _feed_early(self, transport: Any) -> None:
        early, self.early = bytes(self.early), bytearray()
        protocol = transport.get_protocol()
        if protocol is not self and not transport.is_closing():
            _deliver(protocol, early)

    def _failed(self, transport: Any, exc: BaseException) -> None:
        peername = transport.get_extra_info("peername")
        host = str(peername[0]) if isinstance(peername, tuple) and peername else "unknown"
        peer = f"{host}:{peername[1]}" if isinstance(peername, tuple) and len(peername) > 1 else host
        self.acceptor.log.failed(self.acceptor.port, host, peer, exc)


class _Pending(asyncio.Protocol):
    """The protocol of a connection whose handshake is done but whose front-end protocol is not made yet: what
    arrives meanwhile (the client's first request comes with its last handshake message) is kept for it."""

    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.eof = False
        self.lost = False
        self.protocol: asyncio.BaseProtocol | None = None

    def data_received(self, data: bytes) -> None:
        self.data.append(bytes(data))

    def eof_received(self) -> bool:
        self.eof = True
        return True  # kept open until the protocol has seen what came before

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.protocol is not None:  # lost while being handed over: the protocol is told
            self.protocol.connection_lost(exc)

    def hand_over(self, protocol: asyncio.BaseProtocol, transport: Any, raw: Any = None) -> None:
        if raw is not None:
            setattr(transport, RAW_TRANSPORT, raw)  # see unsent_bytes
        self.protocol = protocol
        transport.set_protocol(protocol)  # (flow-control calls from now on reach it)
        protocol.connection_made(transport)
        low, high = transport.get_write_buffer_limits()
        if high == 0:
            # Our protocols set a high-water mark of 0 to learn when the transport holds unsent bytes. asyncio's
            # TLS transport (3.11+) compares `size >= high`, so with 0 it pauses the protocol on a write that left
            # nothing unsent (and resumes it on the next): a mark of 1 (low 0) means what 0 means on a TCP
            # transport. (A protocol paused meanwhile is resumed here.)
            transport.set_write_buffer_limits(high=1, low=0)
        for data in self.data:
            _deliver(protocol, data)
        self.data.clear()
        if self.eof and not protocol.eof_received():  # type: ignore[attr-defined]  # a Protocol
            transport.close()


RAW_TRANSPORT = "_pytriton_raw_transport"  # the TCP transport under a TLS transport the acceptor handed over


def unsent_bytes(transport: Any) -> int:
    """Bytes `transport` holds that the client has not taken. asyncio's TLS transport encrypts what it is given and
    passes it all down at once, counting only what it has not: the TCP transport under it holds the rest."""
    raw = getattr(transport, RAW_TRANSPORT, None)
    if raw is None:  # a wrapper (the direct-write transport) around the TLS transport
        raw = getattr(getattr(transport, "transport", None), RAW_TRANSPORT, None)
    return cast(int, transport.get_write_buffer_size() + (raw.get_write_buffer_size() if raw is not None else 0))


def _deliver(protocol: Any, data: bytes) -> None:
    """`data` to a protocol as if its transport had read it (a buffered protocol through its own buffers)."""
    if isinstance(protocol, asyncio.BufferedProtocol):
        view = memoryview(data)
        while view:
            # the view is released before `buffer_updated`: a protocol may grow (resize) its buffer on the next
            # `get_buffer`, which fails while a view of it is held (an HTTP body read straight into its own buffer)
            with memoryview(protocol.get_buffer(len(view))) as buffer:
                n = min(len(buffer), len(view))
                buffer[:n] = view[:n]
            protocol.buffer_updated(n)
            view = view[n:]
    else:
        protocol.data_received(data)
