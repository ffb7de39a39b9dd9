"""A gRPC request's header block: the fields checked as RFC 9113 asks, gRPC's own headers and metadata read."""

from __future__ import annotations

import base64
from typing import Any

from pytriton.frontend.h2.frames import PROTOCOL_ERROR, H2StreamError

_RESERVED_METADATA = frozenset((b"te", b"content-type", b"grpc-timeout", b"grpc-encoding", b"grpc-accept-encoding"))
_CONNECTION_SPECIFIC = frozenset((b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"))
_PSEUDO = (b":method", b":scheme", b":path", b":authority")


class CallHead:
    """What a request's header block says (immutable: the connection reuses it for an identical block)."""

    __slots__ = ("path", "metadata", "timeout", "encoding", "content_length", "accept_gzip")

    def __init__(self, path: bytes, metadata: tuple[Any, ...], timeout: bytes | None, encoding: str | None,
                 content_length: int | None, accept_gzip: bool = False):  # fmt: skip
        self.accept_gzip = accept_gzip  # grpc-accept-encoding lists gzip
        self.path = path
        self.metadata = metadata
        self.timeout = timeout
        self.encoding = encoding
        self.content_length = content_length


def parse_request(stream_id: int, headers: list[tuple[bytes, bytes]]) -> CallHead:
    """A request's header fields, checked as RFC 9113 8.2-8.3 asks (a malformed request is a stream error of type
    PROTOCOL_ERROR), with gRPC's metadata decoded (`-bin` values base64)."""

    def malformed(why: str) -> H2StreamError:
        return H2StreamError(stream_id, PROTOCOL_ERROR, f"malformed request on stream {stream_id}: {why}")

    pseudo: dict[bytes, bytes] = {}
    metadata: list[tuple[str, Any]] = []
    timeout = encoding = None
    content_length = None
    accept_gzip = False
    regular = False
    for name, value in headers:
        if name[:1] == b":":
            if regular:
                raise malformed(f"pseudo-header {name!r} after a regular field")
            if name not in _PSEUDO or name in pseudo:
                raise malformed(f"unknown or repeated pseudo-header {name!r}")
            pseudo[name] = value
            continue
        regular = True
        if name.lower() != name:
            raise malformed(f"field name {name!r} is not lowercase")
        if name in _RESERVED_METADATA:
            if name == b"grpc-timeout":
                timeout = value
            elif name == b"grpc-encoding":
                encoding = value.decode("latin-1")
            elif name == b"grpc-accept-encoding":
                accept_gzip = accept_gzip or b"gzip" in (v.strip() for v in value.split(b","))
            elif name == b"te" and value != b"trailers":
                raise malformed(f"te: {value!r}")
            continue
        if name in _CONNECTION_SPECIFIC:
            raise malformed(f"connection-specific field {name!r}")
        if name == b"content-length":
            if not value.isdigit() or content_length is not None:
                raise malformed(f"content-length: {value!r}")
            content_length = int(value)
            continue
        key = name.decode("latin-1")
        if key.endswith("-bin"):
            try:
                metadata.append((key, base64.b64decode(value + b"=" * (-len(value) % 4))))
            except ValueError:
                continue
        else:
            metadata.append((key, value.decode("latin-1")))
    if b":method" not in pseudo or b":scheme" not in pseudo or not pseudo.get(b":path"):
        raise malformed(":method, :scheme or :path missing or empty")
    return CallHead(pseudo[b":path"], tuple(metadata), timeout, encoding, content_length, accept_gzip)


__all__ = ["CallHead", "parse_request"]
