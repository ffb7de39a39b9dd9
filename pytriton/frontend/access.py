"""Which clients may use which endpoint groups: Triton's restricted APIs plus a local-only default for shm.

Endpoint groups are Triton's: health, metadata, inference, shared-memory, model-config, model-repository,
statistics, trace, logging. A group can require a header with a value (`--http-restricted-api` /
`--grpc-restricted-protocol`, format `group1,group2:key=value`; gRPC clients send the key prefixed with
`triton-grpc-protocol-`). Independently, shared memory is by default only for clients on this host: a
remote client could otherwise make the server map and write host memory. With a token configured for
`shared-memory`, a client that sends the token is accepted from anywhere.

Both front-ends ask `AccessPolicy.enforce`; each maps `AccessDenied` to its own answer (HTTP 403, gRPC
UNAVAILABLE, as Triton does). Peers are given as the front-ends know them: a bare host, or gRPC's
`ipv4:host:port` / `ipv6:[host]:port` / `unix:path`.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
from collections.abc import Callable, Mapping
from urllib.parse import unquote

ENDPOINT_GROUPS = (
    "health",
    "metadata",
    "inference",
    "shared-memory",
    "model-config",
    "model-repository",
    "statistics",
    "trace",
    "logging",
)
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"
ACCESS_TOKEN_HEADER = "triton-access-token"
# How each front-end words a refusal (Triton's words) and the option that configures it.
_WORDING = {"http": ("API", "--http-restricted-api"), "grpc": ("protocol", "--grpc-restricted-protocol")}


class AccessDenied(Exception):
    """A client may not use an endpoint group; the message says what it must do."""


@dataclasses.dataclass(frozen=True)
class Restriction:
    header: str  # lower-case header name as HTTP clients send it
    value: str


def parse_restriction(spec: str, kind: str = "api") -> tuple[list[str], Restriction]:
    """`group1,group2:key=value` -> (groups, Restriction); ValueError with a clear message otherwise (Triton's words,
    `kind` "api" for HTTP's --http-restricted-api, "protocol" for gRPC's --grpc-restricted-protocol)."""
    groups_text, sep, pair = spec.partition(":")  # the value may contain colons, group names cannot
    key, eq, value = pair.partition("=")
    if not sep or not eq or not key or not groups_text:
        raise ValueError(f"restricted API must be given as '<group>[,<group>...]:<key>=<value>', got '{spec}'")
    groups = [g.strip() for g in groups_text.split(",") if g.strip()]
    unknown = [g for g in groups if g not in ENDPOINT_GROUPS]
    if unknown:
        raise ValueError(f"unknown restricted {kind} '{unknown[0]}' (valid: {', '.join(ENDPOINT_GROUPS)})")
    return groups, Restriction(key.strip().lower(), value)


@functools.lru_cache(maxsize=4096)  # asked on every shared-memory request; peers repeat
def is_local_peer(peer: str | None) -> bool:
    """True for loopback and Unix-socket peers. Accepts a bare host or gRPC's `ipv4:h:p`/`ipv6:[h]:p`/`unix:`."""
    if peer is None:
        return False
    peer = unquote(peer)  # grpc percent-encodes IPv6 brackets: ipv6:%5B::1%5D:port
    if peer.startswith("unix:") or peer == "":
        return True
    host = peer
    if peer.startswith("ipv4:"):
        host = peer[5:].rsplit(":", 1)[0]
    elif peer.startswith("ipv6:"):
        host = peer[5:].rsplit(":", 1)[0].strip("[]")
    host = host.split("%", 1)[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost"
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


class AccessPolicy:
    """Per-protocol restrictions and the local-only rule for shared memory."""

    def __init__(
        self,
        restrictions: dict[str, Restriction] | None = None,
        shm_local_only: bool = True,
        header_prefix: str = "",
    ):
        self.restrictions = dict(restrictions or {})
        self.shm_local_only = shm_local_only
        self.header_prefix = header_prefix

    @classmethod
    def from_specs(cls, specs: list[str], shm_local_only: bool = True, header_prefix: str = "",
                   kind: str = "api") -> AccessPolicy:
        """The policy of restriction specs (`kind`: "api" for HTTP's, "protocol" for gRPC's, as Triton's errors name
        them)."""
        restrictions: dict[str, Restriction] = {}
        for spec in specs:
            groups, restriction = parse_restriction(spec, kind)
            for group in groups:
                if group in restrictions:
                    raise ValueError(f"{kind} '{group}' can not be specified in multiple config groups")
                restrictions[group] = restriction
        return cls(restrictions, shm_local_only, header_prefix)

    def header_for(self, group: str) -> str | None:
        restriction = self.restrictions.get(group)
        return None if restriction is None else self.header_prefix + restriction.header

    def restricts(self, group: str) -> bool:
        """Whether `group` is limited at all (by a header, or shared memory to local peers)."""
        return group in self.restrictions or (group == "shared-memory" and self.shm_local_only)

    def enforce(
        self, group: str, headers: Callable[[], Mapping[str, str]], peer: str | None, protocol: str
    ) -> None:
        """Raise AccessDenied unless the client may use `group`; `headers()` is only asked for when a
        restriction needs them. `protocol` ("http" or "grpc") words the refusal."""
        if not self.restricts(group):
            return
        denied = self.check(group, headers() if group in self.restrictions else {}, peer)
        if denied is None:
            return
        noun, option = _WORDING[protocol]
        if denied:
            raise AccessDenied(f"This {noun} is restricted, expecting header '{denied}'")
        raise AccessDenied(
            f"This {noun} is restricted to clients on the server's host; restrict 'shared-memory' with an access "
            f"token ({option}) to let remote clients use it"
        )

    def check(self, group: str, headers: Mapping[str, str], peer: str | None) -> str | None:
        """None if allowed; else why not (what the client must do)."""
        restriction = self.restrictions.get(group)
        if restriction is not None:
            header = self.header_prefix + restriction.header
            if headers.get(header) == restriction.value:
                return None
            return header
        if group == "shared-memory" and self.shm_local_only and not is_local_peer(peer):
            return ""
        return None
