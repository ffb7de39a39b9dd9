"""A model's instance groups as Triton normalises them (`instance_group` of its configuration), and the instances
Triton makes of them: per group, `count` instances named `<group>_<c>`, each on every GPU a KIND_GPU group lists."""

from __future__ import annotations

import dataclasses
from typing import Any

KINDS = ("KIND_CPU", "KIND_GPU", "KIND_MODEL")


@dataclasses.dataclass(frozen=True)
class InstanceGroup:
    """One normalised instance group: its name (Triton's default `<model>_<index>`), resolved kind, count and the
    visible GPU ids of a KIND_GPU group."""

    name: str
    kind: str
    count: int = 1
    gpus: tuple[int, ...] = ()

    def to_triton_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "count": self.count, "gpus": list(self.gpus),
                "secondary_devices": [], "profile": [], "passive": False, "host_policy": ""}

    @classmethod
    def from_triton_dict(cls, data: dict[str, Any]) -> InstanceGroup:
        return cls(str(data["name"]), str(data.get("kind", "KIND_CPU")), int(data.get("count", 1)),
                   tuple(int(g) for g in data.get("gpus", [])))


@dataclasses.dataclass(frozen=True)
class InstancePlace:
    """One model instance: Triton's name for it, its kind as a Python model's `args["model_instance_kind"]` says it
    ("CPU", "GPU", "MODEL") and its visible GPU id (None: not pinned to a GPU)."""

    name: str
    kind: str
    device: int | None = None

    @property
    def device_id(self) -> str:
        """`args["model_instance_device_id"]`: the GPU id, "0" for an instance on no GPU of its own (as Triton)."""
        return str(self.device if self.device is not None else 0)


def group_problem(model: str, group: InstanceGroup) -> str | None:
    """What makes `group` invalid (Triton's wording where it has one), or None."""
    if group.kind not in KINDS:
        return f"instance group {group.name} of model {model}: kind {group.kind} is not supported"
    if group.count < 1:
        return f"instance group {group.name} of model {model}: count must be >= 1, got {group.count}"
    if group.kind == "KIND_MODEL" and group.gpus:
        return f"instance group {group.name} of model {model} has kind KIND_MODEL but specifies one or more GPUs"
    if group.kind == "KIND_GPU" and not group.gpus:
        return f"instance group {group.name} of model {model} has kind KIND_GPU but lists no GPU"
    return None


def places(groups: list[InstanceGroup]) -> list[InstancePlace]:
    """The instances of `groups`, in Triton's order: group by group, `c` of each group, then each GPU of it."""
    found: list[InstancePlace] = []
    for group in groups:
        kind = group.kind.removeprefix("KIND_")
        for c in range(group.count):
            name = f"{group.name}_{c}"
            if group.kind == "KIND_GPU":
                found.extend(InstancePlace(name, kind, gpu) for gpu in group.gpus)
            else:
                found.append(InstancePlace(name, kind))
    return found


__all__ = ["InstanceGroup", "InstancePlace", "group_problem", "places"]
