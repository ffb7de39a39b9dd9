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
from pytriton.model_config.common import enum_member

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
class SequenceState:
    """Implicit state (Triton's `sequence_batching.state`): the server keeps, per sequence, the model's output
    `output_name` and hands it back as input `input_name` on the sequence's next request.

    On a sequence's START request the input is the initial state: `initial_data` (raw bytes, row-major, shaped
    `initial_dims`; Triton's `initial_state` with `data_file`), or zeros shaped `initial_dims` (`zero_data`), or,
    with neither given, zeros shaped `dims` with each variable dimension 1 (Triton leaves that data undefined).
    """

    input_name: str
    output_name: str
    datatype: str = "FP32"
    dims: tuple[int, ...] = (1,)
    initial_dims: tuple[int, ...] | None = None
    initial_data: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(int(d) for d in self.dims))
        if self.initial_dims is not None:
            object.__setattr__(self, "initial_dims", tuple(int(d) for d in self.initial_dims))
        if not self.input_name or not self.output_name:
            raise PyTritonModelConfigError("sequence batching state must have an input_name and an output_name")
        if self.initial_dims is not None and any(d < 0 for d in self.initial_dims):
            raise PyTritonModelConfigError(
                f"initial state for '{self.input_name}' must have fixed dimensions, got {list(self.initial_dims)}")

    @property
    def start_shape(self) -> tuple[int, ...]:
        """The shape of the state on a START request (without the batch dimension)."""
        if self.initial_dims is not None:
            return self.initial_dims
        return tuple(1 if d < 0 else d for d in self.dims)

    def to_triton_dict(self, with_data: bool = False) -> dict[str, Any]:
        """Triton's JSON; `with_data`: an initial state's data too (hex, under `data_hex`: not a field of Triton's)."""
        datatype = "STRING" if self.datatype == "BYTES" else self.datatype
        state: dict[str, Any] = {"input_name": self.input_name, "output_name": self.output_name,
                                 "data_type": f"TYPE_{datatype}", "dims": [str(d) for d in self.dims],
                                 "use_same_buffer_for_input_output": False, "use_growable_memory": False}
        if self.initial_dims is not None:
            initial: dict[str, Any] = {"data_type": f"TYPE_{datatype}", "dims": [str(d) for d in self.initial_dims],
                                       "name": "initial state"}
            if self.initial_data is None:
                initial["zero_data"] = True
            else:
                initial["data_file"] = "initial_state_data"
                if with_data:
                    initial["data_hex"] = self.initial_data.hex()
            state["initial_state"] = [initial]
        return state


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
        states: implicit state the server keeps for each sequence (`SequenceState`).
        iterative: Triton's `iterative_sequence`: a request without a correlation id starts a sequence of its own
            (the server numbers it); a request the model releases with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE runs
            again in its sequence's slot, and the sequence ends when its request is released for good.
    """

    strategy: SequenceStrategy = SequenceStrategy.DIRECT
    max_sequence_idle_microseconds: int = DEFAULT_SEQUENCE_IDLE_US
    controls: tuple[SequenceControl, ...] = ()
    max_candidate_sequences: int = 1
    preferred_batch_size: tuple[int, ...] = ()
    max_queue_delay_microseconds: int = 0
    minimum_slot_utilization: float = 0.0
    states: tuple[SequenceState, ...] = ()
    iterative: bool = False
    strategy_named: bool = dataclasses.field(default=True, repr=False)  # False: a config.pbtxt that names no strategy

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", SequenceStrategy(self.strategy))
        object.__setattr__(self, "states", tuple(self.states))
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
        for field in ("input_name", "output_name"):
            names = [getattr(state, field) for state in self.states]
            for name in names:
                if names.count(name) > 1:
                    raise PyTritonModelConfigError(f"sequence batching state {field} '{name}' is specified twice")
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

    def to_triton_dict(self, max_batch_size: int = 0, with_data: bool = False) -> dict[str, Any]:
        config: dict[str, Any] = {
            "max_sequence_idle_microseconds": self.max_sequence_idle_microseconds,
            "control_input": [c.to_triton_dict() for c in self.controls],
            "state": [state.to_triton_dict(with_data) for state in self.states],
            "iterative_sequence": self.iterative,
        }
        if self.strategy is SequenceStrategy.OLDEST:
            preferred = list(self.preferred_batch_size) or ([max_batch_size] if max_batch_size > 0 else [])
            config["oldest"] = {"max_candidate_sequences": self.max_candidate_sequences,
                                "preferred_batch_size": preferred,
                                "max_queue_delay_microseconds": self.max_queue_delay_microseconds,
                                "preserve_ordering": False}
        elif self.strategy_named:  # (Direct is the strategy of a config that names none: Triton then shows none)
            config["direct"] = {"max_queue_delay_microseconds": self.max_queue_delay_microseconds,
                                "minimum_slot_utilization": self.minimum_slot_utilization}
        return config


def states_from_triton(data: dict[str, Any], read_file: Any = None) -> tuple[SequenceState, ...]:
    """Triton's JSON `sequence_batching.state` entries; `read_file(name)` gives an initial state's `data_file`."""
    states = []
    for entry in data.get("state", []):
        dtype = str(entry.get("data_type", "TYPE_INVALID")).replace("TYPE_", "")
        initial = entry.get("initial_state") or []
        if len(initial) > 1:
            raise PyTritonModelConfigError(
                f"sequence batching state '{entry.get('input_name', '')}' has more than one initial state")
        initial_dims = None
        initial_data = None
        if initial:
            init = initial[0]
            initial_dims = tuple(int(d) for d in init.get("dims", []))
            if "data_hex" in init:  # (pytriton's own round trip)
                initial_data = bytes.fromhex(init["data_hex"])
            elif init.get("data_file"):
                if read_file is None:
                    raise PyTritonModelConfigError("initial state 'data_file' is not supported here")
                initial_data = read_file(init["data_file"])
            elif not init.get("zero_data"):
                raise PyTritonModelConfigError(
                    f"initial state for '{entry.get('input_name', '')}' must set 'zero_data' or 'data_file'")
        states.append(SequenceState(entry.get("input_name", ""), entry.get("output_name", ""),
                                    "BYTES" if dtype == "STRING" else dtype, tuple(int(d) for d in entry.get("dims", [])),
                                    initial_dims, initial_data))
    return tuple(states)


def sequence_batcher_from_triton(data: dict[str, Any], read_file: Any = None) -> SequenceBatcher:
    """Triton's JSON `sequence_batching` (json_format field names) as a SequenceBatcher."""
    states = states_from_triton(data, read_file)
    controls = []
    for entry in data.get("control_input", []):
        for control in entry.get("control", []):
            kind = enum_member(ControlKind, control.get("kind", "CONTROL_SEQUENCE_START"), "control kind")
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
            max_queue_delay_microseconds=int(oldest.get("max_queue_delay_microseconds", 0)), states=states,
            iterative=bool(data.get("iterative_sequence", False)))
    return SequenceBatcher(
        SequenceStrategy.DIRECT, int(data.get("max_sequence_idle_microseconds", 0)), tuple(controls),
        max_queue_delay_microseconds=int(direct.get("max_queue_delay_microseconds", 0)),
        minimum_slot_utilization=float(direct.get("minimum_slot_utilization", 0.0)), states=states,
        iterative=bool(data.get("iterative_sequence", False)), strategy_named="direct" in data)
