"""The response cache's LRU, its request key and `--cache-config` parsing."""

from __future__ import annotations

import pytest

from pytriton.config.cache import cache_config_items, parse_cache_config
from pytriton.core.response_cache import CachedResponse, ResponseCache, request_key
from pytriton.core.types import ExecutionRequest, InferRequest, RequestedOutput, Tensor


def entry(nbytes: int, tag: str = "") -> CachedResponse:
    return CachedResponse((("Y", "UINT8", (nbytes,), b"x" * nbytes),), (("tag", tag),))


def test_lru_evicts_the_least_recently_used_within_the_size():
    cache = ResponseCache(100)
    assert cache.insert(b"a", entry(40)) and cache.insert(b"b", entry(40))
    assert cache.lookup(b"a") is not None  # a is now the most recent
    assert cache.insert(b"c", entry(40))  # b makes room
    assert cache.lookup(b"b") is None and cache.lookup(b"a") is not None and len(cache) == 2
    assert cache.used == 80
    assert not cache.insert(b"a", entry(10))  # stored already
    assert not cache.insert(b"big", entry(101)) and len(cache) == 2  # larger than the cache: not stored
    assert cache.insert(b"whole", entry(100)) and len(cache) == 1 and cache.used == 100


def test_a_stored_response_gives_fresh_tensors():
    stored = CachedResponse.of([Tensor("Y", "FP32", (1,), memoryview(b"\x00\x00\x80?"))], {"p": 1})
    (tensor,) = stored.tensors()
    assert (tensor.name, tensor.datatype, tensor.shape, bytes(tensor.data)) == ("Y", "FP32", (1,), b"\x00\x00\x80?")
    assert stored.nbytes == 4 and dict(stored.parameters) == {"p": 1}


def key(inputs, outputs=(), parameters=None, name="m", version=1):
    request = InferRequest(name, inputs=list(inputs), outputs=[RequestedOutput(*o) for o in outputs],
                           parameters=parameters or {})
    return request_key(name, version, request, ExecutionRequest(request.inputs, {}, [], {}, request.parameters))


def test_the_key_covers_what_an_answer_depends_on():
    x = Tensor("X", "UINT8", (4,), b"abcd")
    base = key([x])
    assert key([Tensor("X", "UINT8", (4,), bytearray(b"abcd"))]) == base  # the bytes, wherever they come from
    assert key([Tensor("X", "UINT8", (4,), b"abce")]) != base
    assert key([Tensor("X", "INT8", (4,), b"abcd")]) != base
    assert key([Tensor("X", "UINT8", (2, 2), b"abcd")]) != base
    assert key([x], name="n") != base and key([x], version=2) != base
    assert key([x, Tensor("Z", "UINT8", (0,), b"")]) != base
    assert key([Tensor("Z", "UINT8", (1,), b"z"), x]) == key([x, Tensor("Z", "UINT8", (1,), b"z")])  # input order
    assert key([x], outputs=[("Y", {})]) != base
    assert key([x], outputs=[("Y", {"binary_data": True})]) == key([x], outputs=[("Y", {})])
    assert key([x], outputs=[("Y", {"classification": 2})]) != key([x], outputs=[("Y", {})])
    assert key([x], parameters={"k": 1}) != base
    assert key([x], parameters={"priority": 2, "timeout": 100}) == base


def test_requests_writing_into_a_client_region_are_not_cached():
    request = InferRequest("m", inputs=[Tensor("X", "UINT8", (1,), b"a")])
    execution = ExecutionRequest(request.inputs, {}, ["Y"], {"Y": object()}, {})  # type: ignore[dict-item]
    assert request_key("m", 1, request, execution) is None


def test_cache_config_parsing():
    assert parse_cache_config([]) is None
    assert parse_cache_config(["local,size=1048576"]) == 1048576
    assert cache_config_items({"local": {"size": 10}}) == ["local,size=10"]
    for bad, message in (("size=10", "expects <cache>,<key>=<value>"), ("redis,host=h", "unknown cache 'redis'"),
                         ("local,bytes=1", "unknown setting 'bytes'"), ("local,size=-1", ">= 0"),
                         ("local,size=1k", "integer number of bytes")):
        with pytest.raises(ValueError, match=message):
            parse_cache_config([bad])
