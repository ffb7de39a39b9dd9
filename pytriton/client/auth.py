"""Access-token headers for servers that restrict endpoint groups (`--http-restricted-api`,
`--grpc-restricted-protocol`, `TritonSecurityConfig`).

Over HTTP the token travels as `triton-access-token: <token>`; over gRPC as the metadata key
`triton-grpc-protocol-triton-access-token` (the server adds the `triton-grpc-protocol-` prefix to the key
it was configured with).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from pytriton.client.exceptions import PyTritonClientValueError

ACCESS_TOKEN_HEADER = "triton-access-token"
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"
GRPC_ACCESS_TOKEN_HEADER = GRPC_HEADER_PREFIX + ACCESS_TOKEN_HEADER


def create_auth_headers(access_token: str | None, protocol: str = "http") -> dict[str, Any]:
    """The headers that carry `access_token` over `protocol` ("http" or "grpc"); {} without a token."""
    scheme = (protocol or "").lower()
    scheme = scheme.removesuffix("://")
    if scheme == "https":
        scheme = "http"
    if scheme not in ("http", "grpc"):
        raise PyTritonClientValueError(f"Unsupported protocol {protocol!r}; expected 'http' or 'grpc'")
    if not access_token:
        return {}
    if scheme == "grpc":
        return {GRPC_ACCESS_TOKEN_HEADER: access_token}
    return {ACCESS_TOKEN_HEADER: access_token}


def extract_access_token_from_headers(headers: Mapping[str, Any] | None) -> str | None:
    """The access token carried by `headers` (HTTP or gRPC form, any letter case), or None."""
    if not headers:
        return None
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() in (ACCESS_TOKEN_HEADER, GRPC_ACCESS_TOKEN_HEADER):
            return cast(str | None, value)
    return None
