"""A server that runs as several front-end processes (`--frontend-processes N`, docs/multi-frontend.md), seen by a
client as one: each process counts what it served and the statistics extension answers the sum over all of them;
a client shared-memory region registered (or unregistered) through one process is registered with every process
before the answer goes out, since the client's next request may reach another one."""

from __future__ import annotations

import base64
import copy
from typing import TYPE_CHECKING, Any, Protocol

from pytriton.core.shm_registry import CudaShmRegion, SystemShmRegion

if TYPE_CHECKING:
    from pytriton.core.server_core import ServerCore


class Peers(Protocol):
    """The other front-end processes of the group (ServerCore.peers), as this process reaches them."""

    async def statistics(self, name: str, version: str) -> list[list[dict[str, Any]]]:
        """The others' `model_stats` entries for (model name, version) (those that answered)."""

    async def shm(self, action: str, kind: str, name: str, args: list[Any]) -> None:
        """Apply a shared-memory registration ("register") or unregistration ("unregister") of `kind` ("system",
        "cuda") in every process of the group, this one included, one order at a time in the same order
        everywhere. A registration that one refuses is undone in those that applied it, and the refusal raised as
        the ServerError that process gave."""


def _add(into: dict[str, Any], other: dict[str, Any]) -> None:
    """Add `other` into `into`: numbers add up (the last inference: the latest), nested entries recursively, batch
    statistics per batch size; names, versions and batch sizes stay."""
    for key, value in other.items():
        if key in ("name", "version", "batch_size", "memory_usage"):
            into.setdefault(key, copy.deepcopy(value))
        elif key == "last_inference":
            into[key] = max(into.get(key, 0), value)
        elif key == "batch_stats":
            sizes = {b["batch_size"]: b for b in into.setdefault(key, [])}
            for batch in value:
                _add(sizes.setdefault(batch["batch_size"], {}), batch)
            into[key] = [sizes[size] for size in sorted(sizes)]
        elif isinstance(value, dict):
            _add(into.setdefault(key, {}), value)
        else:
            into[key] = into.get(key, 0) + value


def merge_statistics(parts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Triton's `model_stats` lists of several processes summed per model version, in the first one's order."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for entries in parts:
        for entry in entries:
            _add(merged.setdefault((entry["name"], entry["version"]), {}), entry)
    return list(merged.values())


async def statistics_of_all(core: ServerCore, name: str = "", version: str = "") -> list[dict[str, Any]]:
    """What the statistics extension answers: this process's statistics (its errors first: an unknown model), plus
    the other front-end processes' when there are any."""
    local = core.statistics(name, version)
    if core.peers is None:
        return local
    return merge_statistics([local, *await core.peers.statistics(name, version)])


_KINDS = {"system": SystemShmRegion, "cuda": CudaShmRegion}


def apply_shm(core: ServerCore, action: str, kind: str, name: str, args: list[Any]) -> None:
    """A registration or unregistration in this process's registry (what a peer asks for, what a client asked)."""
    if action == "unregister":
        core.shm.unregister(_KINDS[kind], name)
    elif kind == "system":
        key, offset, byte_size = args
        core.shm.register_system(name, key, offset, byte_size)
    else:
        raw_handle, device_id, byte_size = args
        core.shm.register_cuda(name, raw_handle, device_id, byte_size)


async def register_shm(core: ServerCore, kind: str, name: str, *args: Any) -> None:
    """Register a client's region of `kind` here; with several front-end processes, in every one of them, in the
    order the group gives (if one refuses, it is unregistered where it was registered and the refusal is the
    answer)."""
    if core.peers is None:
        apply_shm(core, "register", kind, name, list(args))
        return
    if kind == "cuda" and isinstance(args[0], bytes):  # (gRPC's raw bytes travel as HTTP's base64 text)
        args = (base64.b64encode(args[0]).decode(), *args[1:])
    await core.peers.shm("register", kind, name, list(args))


async def unregister_shm(core: ServerCore, kind: str, name: str = "") -> None:
    """Unregister a client's region of `kind` (all of them: no name) here, or in every front-end process."""
    if core.peers is None:
        apply_shm(core, "unregister", kind, name, [])
    else:
        await core.peers.shm("unregister", kind, name, [])
