"""Sequence batching of a stateful model (Triton's `sequence_batching`): a pytriton extension of PyTriton's
`ModelConfig`, which has none.

A sequence is a run of requests with one correlation id (tritonclient's `sequence_id`), the first flagged
`sequence_start`, the last `sequence_end`. Its requests go to one instance, in order; control tensors tell the
model where a sequence starts and ends, whether a batch slot holds a request, and which sequence it is.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from pytriton.exceptions import PyTritonModelConfigError

DEFAULT_SEQUENCE_IDLE_US = 1_000_000  # Triton's default max_sequence_idle_microseconds


class SequenceStrategy(enum.Enum):
    """Direct: each sequence owns a batch slot of one instance. Oldest: the oldest requests of candidate sequences
    are batched dynamically."""

    DIRECT = "direct"
    OLDEST = "oldest"


class ControlKind(enum.Enum):
    START = "CONTROL_SEQUENCE_START"
    END = "CONTROL_SEQUENCE_END"
    READY = "CONTROL_SEQUENCE_READY"
    CORRID = "CONTROL_SEQUENCE_CORRID"


BOOLEAN_CONTROL_TYPES = {"int32": "INT32", "fp32": "FP32", "bool": "BOOL"}
CORRID_TYPES = ("UINT64", "INT64", "UINT32", "INT32", "BYTES")  # (Triton's TYPE_STRING is BYTES on the wire)


@dataclasses.dataclass(frozen=True)
class SequenceControl:
    """One control input: the tensor `name` the model reads, its `kind`, and its datatype (Triton datatype) and
    false/true values (START, END and READY); CORRID takes only a datatype."""

    kind: ControlKind
    name: str
    datatype: str = "INT32"
    false_true: tuple[Any, Any] = (0, 1)

    def __post_init__(self) -> None:
        kind = ControlKind(self.kind)
        object.__setattr__(self, "kind", kind)
        if not self.name:
            raise PyTritonModelConfigError("sequence batching control tensor must have a name")
        if kind is ControlKind.CORRID:
            if self.datatype not in CORRID_TYPES:
                raise PyTritonModelConfigError(
                    f"unexpected data type for control CONTROL_SEQUENCE_CORRID '{self.name}'. Allowed data types are "
                    "TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING")
        elif self.datatype not in BOOLEAN_CONTROL_TYPES.values() or len(self.false_true) != 2:
            raise PyTritonModelConfigError(
                f"sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for "
                f"{kind.value} ('{self.name}')")

    def to_triton_dict(self) -> dict[str, Any]:
        if self.kind is ControlKind.CORRID:
            datatype = "STRING" if self.datatype == "BYTES" else self.datatype
            control: dict[str, Any] = {"data_type": f"TYPE_{datatype}"}
        else:
            field = {"INT32": "int32_false_true", "FP32": "fp32_false_true", "BOOL": "bool_false_true"}[self.datatype]
            control = {field: list(self.false_true)}
        return {"name": self.name, "control": [{"kind": self.kind.value, **control}]}


@dataclasses.dataclass(frozen=True)
class SequenceBatcher:
    """Triton's `sequence_batching` (pytriton extension of `ModelConfig`: `ModelConfig(sequence_batcher=...)`).

    Args:
        strategy: DIRECT (a batch slot per sequence; empty slots below the highest busy one get a not-ready
            request) or OLDEST (candidate sequences' oldest requests batched dynamically).
        max_sequence_idle_microseconds: a sequence that gets no request for this long is released.
        controls: the control inputs the model reads.
        max_candidate_sequences: OLDEST: sequences an instance holds at once (others wait for a slot).
        preferred_batch_size: OLDEST: batch sizes to form without waiting.
        max_queue_delay_microseconds: OLDEST: how long a batch may wait to grow; DIRECT: with
            minimum_slot_utilization, how long a batch may wait for more slots to have a request.
        minimum_slot_utilization: DIRECT: the fraction of slots with a request that starts a batch at once.
    """

    strategy: SequenceStrategy = SequenceStrategy.DIRECT
    max_sequence_idle_microseconds: int = DEFAULT_SEQUENCE_IDLE_US
    controls: tuple[SequenceControl, ...] = ()
    max_candidate_sequences: int = 1
    preferred_batch_size: tuple[int, ...] = ()
    max_queue_delay_microseconds: int = 0
    minimum_slot_utilization: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", SequenceStrategy(self.strategy))
        object.__setattr__(self, "controls", tuple(self.controls))
        object.__setattr__(self, "preferred_batch_size", tuple(int(s) for s in self.preferred_batch_size))
        if self.max_sequence_idle_microseconds <= 0:
            object.__setattr__(self, "max_sequence_idle_microseconds", DEFAULT_SEQUENCE_IDLE_US)
        names = [c.name for c in self.controls]
        for name in names:
            if names.count(name) > 1:
                raise PyTritonModelConfigError(
                    f"sequence batching control tensor '{name}' is specified for multiple control kinds")
        kinds = [c.kind for c in self.controls]
        for kind in kinds:
            if kinds.count(kind) > 1:
                raise PyTritonModelConfigError(f"sequence batching specifies multiple {kind.value} tensors")
        if self.strategy is SequenceStrategy.OLDEST and self.max_candidate_sequences < 1:
            raise PyTritonModelConfigError("sequence batching max_candidate_sequences must be positive")

    def control(self, kind: ControlKind) -> SequenceControl | None:
        for control in self.controls:
            if control.kind is kind:
                return control
        return None

    def check(self, model_name: str, max_batch_size: int) -> None:
        """Triton's checks of the preferred sizes against max_batch_size (model_config_utils.cc wording)."""
        for size in self.preferred_batch_size:
            if size <= 0:
                raise PyTritonModelConfigError(
                    f"sequence batching preferred batch size must be positive for {model_name}")
            if size > max_batch_size:
                raise PyTritonModelConfigError(
                    f"sequence batching preferred batch size must be <= max batch size for {model_name}")

    def to_triton_dict(self, max_batch_size: int = 0) -> dict[str, Any]:
        config: dict[str, Any] = {
            "max_sequence_idle_microseconds": self.max_sequence_idle_microseconds,
            "control_input": [c.to_triton_dict() for c in self.controls],
            "state": [],
            "iterative_sequence": False,
        }
        if self.strategy is SequenceStrategy.OLDEST:
            preferred = list(self.preferred_batch_size) or ([max_batch_size] if max_batch_size > 0 else [])
            config["oldest"] = {"max_candidate_sequences": self.max_candidate_sequences,
                                "preferred_batch_size": preferred,
                                "max_queue_delay_microseconds": self.max_queue_delay_microseconds,
                                "preserve_ordering": False}
        else:
            config["direct"] = {"max_queue_delay_microseconds": self.max_queue_delay_microseconds,
                                "minimum_slot_utilization": self.minimum_slot_utilization}
        return config


def sequence_batcher_from_triton(data: dict[str, Any]) -> SequenceBatcher:
    """Triton's JSON `sequence_batching` (json_format field names) as a SequenceBatcher."""
    controls = []
    for entry in data.get("control_input", []):
        for control in entry.get("control", []):
            kind = ControlKind(control.get("kind", "CONTROL_SEQUENCE_START"))
            if kind is ControlKind.CORRID:
                dtype = str(control.get("data_type", "TYPE_UINT64")).replace("TYPE_", "")
                controls.append(SequenceControl(kind, entry.get("name", ""), "BYTES" if dtype == "STRING" else dtype))
                continue
            for field, datatype, cast in (("int32_false_true", "INT32", int), ("fp32_false_true", "FP32", float),
                                          ("bool_false_true", "BOOL", bool)):
                if control.get(field):
                    values: Any = tuple(cast(v) for v in control[field])
                    controls.append(SequenceControl(kind, entry.get("name", ""), datatype, values))
                    break
            else:
                controls.append(SequenceControl(kind, entry.get("name", ""), "", (0, 0)))  # (refused: no values)
    oldest = data.get("oldest")
    direct = data.get("direct") or {}
    if oldest is not None:
        return SequenceBatcher(
            SequenceStrategy.OLDEST, int(data.get("max_sequence_idle_microseconds", 0)), tuple(controls),
            max_candidate_sequences=int(oldest.get("max_candidate_sequences", 0)),
            preferred_batch_size=tuple(int(s) for s in oldest.get("preferred_batch_size", [])),
            max_queue_delay_microseconds=int(oldest.get("max_queue_delay_microseconds", 0)))
    return SequenceBatcher(
        SequenceStrategy.DIRECT, int(data.get("max_sequence_idle_microseconds", 0)), tuple(controls),
        max_queue_delay_microseconds=int(direct.get("max_queue_delay_microseconds", 0)),
        minimum_slot_utilization=float(direct.get("minimum_slot_utilization", 0.0)))
