"""gzip/deflate request messages: inflated exactly, refused past the limit before anything large is held."""

from __future__ import annotations

import gzip
import os
import zlib

import grpc
import pytest

from pytriton.frontend.h2.message import DECOMPRESS_CHUNK, RpcAbort, decompress


@pytest.mark.parametrize("size", [0, 1, DECOMPRESS_CHUNK - 1, DECOMPRESS_CHUNK, 3 * DECOMPRESS_CHUNK + 7])
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_round_trip_is_exact(size, encoding):
    data = os.urandom(size // 2) + bytes(size - size // 2)
    packed = gzip.compress(data) if encoding == "gzip" else zlib.compress(data)
    out = decompress(memoryview(packed), encoding, limit=size)
    assert bytes(out) == data and len(out) == size


def test_past_the_limit_is_resource_exhausted():
    packed = gzip.compress(bytes(5 * DECOMPRESS_CHUNK))
    with pytest.raises(RpcAbort) as info:
        decompress(packed, "gzip", limit=5 * DECOMPRESS_CHUNK - 1)
    assert info.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize("packed", [gzip.compress(b"x" * 1000, mtime=0)[:-5], b"not gzip at all"])
def test_truncated_or_broken_data_is_an_error(packed):
    with pytest.raises(RpcAbort) as info:
        decompress(packed, "gzip", limit=1 << 20)
    assert info.value.code is grpc.StatusCode.INTERNAL
