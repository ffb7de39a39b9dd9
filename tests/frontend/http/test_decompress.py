"""Request-body decompression: bounded by the input limit whatever the compressed size, a step at a time."""

from __future__ import annotations

import gzip
import zlib

import pytest

from pytriton.exceptions import ServerError
from pytriton.frontend.http.app import INFLATE_STEP, _decompress, _TooLarge


def _compress(data: bytes, encoding: str) -> bytes:
    return gzip.compress(data) if encoding == "gzip" else zlib.compress(data)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "GZIP "])
@pytest.mark.parametrize("size", [0, 1, INFLATE_STEP - 1, INFLATE_STEP, INFLATE_STEP + 1, 3 * INFLATE_STEP])
def test_round_trip_at_step_boundaries(encoding, size):
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    assert _decompress(_compress(data, encoding.strip().lower()), encoding, 3 * INFLATE_STEP) == data


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_limit_is_exact(encoding):
    limit = INFLATE_STEP + 12345
    assert len(_decompress(_compress(b"a" * limit, encoding), encoding, limit)) == limit
    with pytest.raises(_TooLarge, match=rf"^request size of more than {limit} bytes after {encoding} decompression "
                                        rf"exceeds the maximum allowed input size of {limit} bytes\. "
                                        r"Use --http-max-input-size to increase the limit\.$"):
        _decompress(_compress(b"a" * (limit + 1), encoding), encoding, limit)


def test_bomb_stops_one_step_past_the_limit(monkeypatch):
    """256 MiB of zeros in 256 KiB of gzip: refused after inflating the limit and one step, not 256 MiB."""
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    bomb = b"".join(compressor.compress(zeros) for _ in range(256)) + compressor.flush()
    calls = []
    real = zlib.decompressobj

    def counting(*args, **kwargs):
        inner = real(*args, **kwargs)

        class Counted:
            def __getattr__(self, name):
                return getattr(inner, name)

            def decompress(self, data, max_length=0):
                out = inner.decompress(data, max_length)
                calls.append(len(out))
                return out

        return Counted()

    monkeypatch.setattr(zlib, "decompressobj", counting)
    with pytest.raises(_TooLarge):
        _decompress(bomb, "gzip", 4 * INFLATE_STEP)
    assert 4 * INFLATE_STEP < sum(calls) <= 5 * INFLATE_STEP


@pytest.mark.parametrize("body, message", [
    (gzip.compress(b"{}" * 1000, mtime=0)[:-12], "the compressed data is incomplete"),
    (b"\x1f\x8b\x08\x00garbage", "failed to decompress the gzip request body"),
])
def test_broken_streams_are_invalid(body, message):
    with pytest.raises(ServerError, match=message):
        _decompress(body, "gzip", 1 << 20)


def test_identity_unknown_and_empty():
    assert _decompress(b"abc", None, 10) == b"abc"
    assert _decompress(b"abc", "identity", 10) == b"abc"
    assert _decompress(b"", "gzip", 10) == b""
    with pytest.raises(ServerError, match="unsupported Content-Encoding 'br'"):
        _decompress(b"abc", "br", 10)
