"""Access policy: restricted endpoint groups with a token, and shared memory for local clients only."""

from __future__ import annotations

import asyncio

import pytest

from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.frontend.access import AccessDenied, AccessPolicy, is_local_peer, parse_restriction
from pytriton.frontend.http.app import HttpApp
from pytriton.frontend.http1 import HttpRequest


@pytest.mark.parametrize(
    "peer, local",
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("ipv4:127.0.0.1:5000", True),
        ("ipv6:%5B::1%5D:5000", True),
        ("unix:/tmp/sock", True),
        ("", True),
        ("10.0.0.7", False),
        ("ipv4:192.168.1.2:5000", False),
        ("ipv6:%5B2001:db8::1%5D:80", False),
        (None, False),
    ],
)
def test_local_peers(peer, local):
    assert is_local_peer(peer) is local


def test_parse_restriction():
    groups, restriction = parse_restriction("shared-memory,statistics:triton-access-token=abc:d=e")
    assert groups == ["shared-memory", "statistics"]
    assert (restriction.header, restriction.value) == ("triton-access-token", "abc:d=e")
    # tritonserver 2.51's words (its qa/L0_http and qa/L0_grpc test.sh look for them in its log)
    with pytest.raises(ValueError, match="^unknown restricted api 'sharedmemory' \\(valid: health, "):
        parse_restriction("sharedmemory:k=v")
    with pytest.raises(ValueError, match="^unknown restricted protocol 'model-reposit' "):
        AccessPolicy.from_specs(["model-reposit,health:k1=v1"], kind="protocol")
    with pytest.raises(ValueError, match="must be given as"):
        parse_restriction("shared-memory")
    with pytest.raises(ValueError, match="^api 'logging' can not be specified in multiple config groups$"):
        AccessPolicy.from_specs(["logging:a=b", "logging:c=d"])
    with pytest.raises(ValueError, match="^protocol 'health' can not be specified in multiple config groups$"):
        AccessPolicy.from_specs(["model-repository,health:k1=v1", "metadata,health:k2=v2"], kind="protocol")


def test_token_and_local_rules():
    policy = AccessPolicy.from_specs(["statistics:triton-access-token=s3cret"])
    assert policy.check("statistics", {}, "127.0.0.1") == "triton-access-token"
    assert policy.check("statistics", {"triton-access-token": "wrong"}, "127.0.0.1") == "triton-access-token"
    assert policy.check("statistics", {"triton-access-token": "s3cret"}, "10.0.0.1") is None
    assert policy.check("inference", {}, "10.0.0.1") is None
    assert policy.check("shared-memory", {}, "127.0.0.1") is None
    assert policy.check("shared-memory", {}, "10.0.0.1") == ""  # remote: refused by default
    assert AccessPolicy(shm_local_only=False).check("shared-memory", {}, "10.0.0.1") is None
    tokened = AccessPolicy.from_specs(["shared-memory:triton-access-token=t"], header_prefix="triton-grpc-protocol-")
    assert tokened.check("shared-memory", {"triton-grpc-protocol-triton-access-token": "t"}, "10.0.0.1") is None
    assert tokened.check("shared-memory", {}, "127.0.0.1") == "triton-grpc-protocol-triton-access-token"


def test_enforce_words_refusals_per_protocol():
    policy = AccessPolicy.from_specs(["logging:triton-access-token=t"], header_prefix="triton-grpc-protocol-")
    asked = []

    def headers():
        asked.append(1)
        return {}

    policy.enforce("inference", headers, "10.0.0.1", "grpc")  # open group: no headers needed
    policy.enforce("shared-memory", headers, "127.0.0.1", "grpc")  # local peer, no token configured
    assert asked == []
    with pytest.raises(AccessDenied) as info:
        policy.enforce("logging", headers, "127.0.0.1", "grpc")
    assert str(info.value) == "This protocol is restricted, expecting header 'triton-grpc-protocol-triton-access-token'"
    with pytest.raises(AccessDenied) as info:
        policy.enforce("shared-memory", headers, "10.0.0.1", "http")
    assert str(info.value).startswith("This API is restricted to clients on the server's host")
    assert "--http-restricted-api" in str(info.value)
    policy.enforce("logging", lambda: {"triton-grpc-protocol-triton-access-token": "t"}, "10.0.0.1", "grpc")


def test_http_app_refuses_remote_shared_memory_registration():
    async def main():
        core = ServerCore("/nonexistent", "t", 0)
        app = HttpApp(core, LogSettings(), TraceSettings())
        body = b'{"key": "/x", "byte_size": 16}'
        remote = HttpRequest("POST", "/v2/systemsharedmemory/region/r/register", "", {}, body, "10.9.8.7")
        response = await app.handle(remote)
        assert response.status == 403
        assert b"restricted to clients on the server's host" in response.parts[0]
        status = await app.handle(HttpRequest("GET", "/v2/systemsharedmemory/status", "", {}, b"", "10.9.8.7"))
        assert status.status == 403
        local = await app.handle(HttpRequest("GET", "/v2/systemsharedmemory/status", "", {}, b"", "127.0.0.1"))
        assert (local.status, local.parts) == (200, [b"[]"])
        infer = HttpRequest(
            "POST", "/v2/models/m/infer", "", {},
            b'{"inputs":[{"name":"I","datatype":"FP32","shape":[1],'
            b'"parameters":{"shared_memory_region":"r","shared_memory_byte_size":4}}]}', "10.9.8.7",
        )
        core.registry.get = lambda *a: type("M", (), {"config": type("C", (), {"decoupled": False})()})()
        response = await app.handle(infer)
        assert response.status == 403  # a remote client cannot make the server read or write a region either

    asyncio.run(main())
