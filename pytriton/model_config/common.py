"""Configuration structures shared by the user-facing ModelConfig and the server's model description."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Dict, Optional, TypeVar

from pytriton.exceptions import PyTritonModelConfigError

_E = TypeVar("_E", bound=enum.Enum)


class DeviceKind(enum.Enum):
    """Device kind for model deployment."""

    KIND_AUTO = "KIND_AUTO"
    KIND_CPU = "KIND_CPU"
    KIND_GPU = "KIND_GPU"


class TimeoutAction(enum.Enum):
    """What happens to a request that times out in the queue."""

    REJECT = "REJECT"
    DELAY = "DELAY"


def enum_member(kind: type[_E], value: Any, what: str) -> _E:
    """`kind(value)`, or PyTritonModelConfigError naming `what` and the values it may take (a configuration read from
    Triton's JSON form may hold an enum number protobuf has no name for)."""
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(member.value) for member in kind)
        raise PyTritonModelConfigError(f"{what} {value} is not one of {allowed}") from None


@dataclasses.dataclass
class QueuePolicy:
    """Model queue policy (Triton's ModelQueuePolicy)."""

    timeout_action: TimeoutAction = TimeoutAction.REJECT
    default_timeout_microseconds: int = 0
    allow_timeout_override: bool = False
    max_queue_size: int = 0

    def to_triton_dict(self) -> dict[str, Any]:
        return {
            "timeout_action": self.timeout_action.value,
            "default_timeout_microseconds": self.default_timeout_microseconds,
            "allow_timeout_override": self.allow_timeout_override,
            "max_queue_size": self.max_queue_size,
        }


@dataclasses.dataclass
class DynamicBatcher:
    """Dynamic batcher configuration (Triton's ModelDynamicBatching)."""

    max_queue_delay_microseconds: int = 0
    preferred_batch_size: Optional[list[Any]] = None
    preserve_ordering: bool = False
    priority_levels: int = 0
    default_priority_level: int = 0
    default_queue_policy: Optional[QueuePolicy] = None
    priority_queue_policy: Optional[Dict[int, QueuePolicy]] = None

    def to_triton_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "preferred_batch_size": list(self.preferred_batch_size or []),
            "max_queue_delay_microseconds": self.max_queue_delay_microseconds,
            "preserve_ordering": self.preserve_ordering,
            "priority_levels": self.priority_levels,
            "default_priority_level": self.default_priority_level,
        }
        if self.default_queue_policy is not None:
            out["default_queue_policy"] = self.default_queue_policy.to_triton_dict()
        if self.priority_queue_policy:
            out["priority_queue_policy"] = {str(k): v.to_triton_dict() for k, v in self.priority_queue_policy.items()}
        return out


__all__ = ["DeviceKind", "TimeoutAction", "QueuePolicy", "DynamicBatcher"]
