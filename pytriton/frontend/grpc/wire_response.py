"""ModelInfer responses on the wire without protobuf copies: the serialised header followed by `raw_output_contents`
entries (field 6) written straight from the output buffers, and what gives those buffers back once they are sent."""

from __future__ import annotations

from typing import Any, Callable

from tritonclient.grpc import service_pb2 as pb

from pytriton.frontend.grpc.wire import _RAW_OUTPUT_TAG, _STREAM_RESPONSE_TAG, encode_varint


class InferResponseWire:
    """A ModelInferResponse as header + output buffers, and `on_sent`: the call that gives the output buffers back.

    The header is a protobuf message, or already serialised (`encoded`: parsed only if someone reads `header`).
    Whoever writes the response out calls `on_sent` exactly once, when it no longer needs the buffers: the HTTP/2
    transport when the socket has taken the bytes (or the call ended without them), the grpcio fallback right after
    its serializer joined them into one bytes object (`wire_bytes`).
    """

    __slots__ = ("_header", "_encoded", "parts", "on_sent")

    def __init__(self, header: Any, parts: list[Any], release: Callable[[], None] | None,
                 encoded: bytes | None = None):  # fmt: skip
        self._header = header
        self._encoded = encoded
        self.parts = parts
        self.on_sent = release

    @property
    def header(self) -> Any:
        if self._encoded is not None:
            self._header = pb.ModelInferResponse.FromString(self._encoded)
            self._encoded = None
        return self._header

    @property
    def parameters(self) -> Any:
        return self.header.parameters

    def chunks(self) -> list[Any]:
        encoded = self._encoded
        out: list[Any] = [self._header.SerializeToString() if encoded is None else encoded]
        for part in self.parts:
            size = part.nbytes if isinstance(part, memoryview) else len(part)
            out.append(_RAW_OUTPUT_TAG)
            out.append(encode_varint(size))
            if size:
                out.append(part)
        return out


class StreamResponseWire:
    """A ModelStreamInferResponse carrying an InferResponseWire."""

    __slots__ = ("response",)

    def __init__(self, response: InferResponseWire):
        self.response = response

    @property
    def on_sent(self) -> Callable[[], None] | None:
        return self.response.on_sent


def on_sent_of(response: Any) -> Callable[[], None] | None:
    """The release of a response's buffers (None for a response that owns none)."""
    if isinstance(response, (InferResponseWire, StreamResponseWire)):
        return response.on_sent
    return None


def release_unsent(response: Any) -> None:
    """A response that will never be written (its call ended first): its buffers go back now."""
    on_sent = on_sent_of(response)
    if on_sent is not None:
        on_sent()


def infer_response_chunks(response: Any) -> list[Any]:
    """A ModelInferResponse as the buffers that make up its serialised form (header, then tensors)."""
    if isinstance(response, InferResponseWire):
        return response.chunks()
    return [response.SerializeToString()]


def stream_response_chunks(response: Any) -> list[Any]:
    """A ModelStreamInferResponse as buffers: the infer_response field's tag and length, then its chunks."""
    if isinstance(response, StreamResponseWire):
        chunks = response.response.chunks()
        size = sum(c.nbytes if isinstance(c, memoryview) else len(c) for c in chunks)
        return [_STREAM_RESPONSE_TAG, encode_varint(size), *chunks]
    return [response.SerializeToString()]


def wire_bytes(chunks: Callable[[Any], list[Any]], response: Any) -> bytes:
    """For grpc.aio, which wants one bytes object: the chunks joined, then the buffers released (the join copied
    them), whatever happens."""
    try:
        return b"".join(chunks(response))
    finally:
        release_unsent(response)
