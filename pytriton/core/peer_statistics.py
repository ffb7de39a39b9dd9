"""Statistics of a server that runs as several front-end processes (`--frontend-processes N`): each process counts
what it served; the statistics extension answers the sum over all of them, so a client sees one server."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Awaitable, Callable

if TYPE_CHECKING:
    from pytriton.core.server_core import ServerCore

# (model name, version) -> the other processes' `model_stats` entries for that request (those that answered)
PeerStatistics = Callable[[str, str], Awaitable[list[list[dict[str, Any]]]]]


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
    if core.peer_statistics is None:
        return local
    return merge_statistics([local, *await core.peer_statistics(name, version)])
