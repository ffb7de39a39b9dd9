"""The control tensors of a sequence batcher, as Triton delivers them into a stateful model's inputs.

START / END / READY carry the configured false or true value (INT32, FP32 or BOOL), CORRID the correlation id
(UINT64 / INT64 / UINT32 / INT32, or a BYTES string); each is shaped [1], [1, 1] with a batch dimension. A
not-ready request (an empty slot of a Direct batch) has START, END and READY false and CORRID 0.

A model without implicit state gets its controls from the worker (`compact`): the request goes as the client sent it,
flagged SEQUENCE_CONTROLS (the worker adds the control inputs from the correlation id and START / END flags that
travel with every request), and a not-ready request is only a flag (SEQUENCE_NOT_READY: the worker makes its inputs
zero, shaped as those of the batch's first ready request, and drops its answer). The tensors the model sees are the
same either way; this saves the server building, sending and reading back three or four small tensors per row.

Implicit state (`sequence_batching.state`): the state inputs are added as the controls are; the state outputs are
asked of the model and taken out of the client's response unless the config lists them as outputs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytriton.core.types import SEQUENCE_CONTROLS, SEQUENCE_NOT_READY, ExecutionOutput, ExecutionRequest, Tensor
from pytriton.exceptions import invalid_arg
from pytriton.model_config.datatypes import TRITON_TO_NUMPY
from pytriton.model_config.sequence import ControlKind, SequenceBatcher, SequenceState
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.scheduler.dispatcher import ModelScheduler
from pytriton.scheduler.job import ExecutionStats
from pytriton.scheduler.sequence import SequenceScheduler


class SequenceControls:
    """`SequenceRequests` for the core's `ExecutionRequest`s of one model."""

    def __init__(self, model_name: str, policy: SequenceBatcher, max_batch_size: int,
                 outputs: Sequence[str] = ()):
        self.model_name = model_name
        self.policy = policy
        self.shape = (1, 1) if max_batch_size > 0 else (1,)
        self.names = {c.name for c in policy.controls} | {state.input_name for state in policy.states}
        self.corrid = policy.control(ControlKind.CORRID)
        # implicit state: the model gets the state inputs and returns the state outputs; a client sees a state
        # output only when the config lists it as an output (and the client asks for it, or for all outputs)
        self.stateful = bool(policy.states)
        # the worker adds the controls (and makes the not-ready rows): see the module's docstring
        self.compact = bool(policy.controls) and not self.stateful
        self.batch = (1,) if max_batch_size > 0 else ()
        self.outputs = list(outputs)
        self.state_outputs = {state.output_name: state for state in policy.states}
        self.initial = {state.input_name: self._initial(state) for state in policy.states}
        # the control tensors' bytes, worked out once: per control (name, datatype, its bytes for false and true; for
        # CORRID None and the item size of an integer id, 0 for a BYTES one)
        self._plan: list[tuple[str, str, ControlKind, tuple[bytes, bytes] | None, int]] = []
        for control in policy.controls:
            if control.kind is ControlKind.CORRID:
                size = 0 if control.datatype == "BYTES" else np.dtype(TRITON_TO_NUMPY[control.datatype]).itemsize
                self._plan.append((control.name, control.datatype, control.kind, None, size))
            else:
                dtype = TRITON_TO_NUMPY[control.datatype]
                values = tuple(np.array([v], dtype=dtype).tobytes() for v in control.false_true)
                self._plan.append((control.name, control.datatype, control.kind, (values[0], values[1]), 0))
        self._zeros: dict[tuple[str, tuple[int, ...]], bytes] = {}  # a not-ready request's inputs (bounded)
        self._nulls: dict[tuple[str, ...], ExecutionRequest] = {}  # not-ready requests by the outputs asked (compact)

    def _initial(self, state: SequenceState) -> Tensor:
        shape = self.batch + state.start_shape
        if state.initial_data is not None:
            return Tensor(state.input_name, state.datatype, shape, state.initial_data)
        itemsize = 4 if state.datatype == "BYTES" else np.dtype(TRITON_TO_NUMPY[state.datatype]).itemsize
        return Tensor(state.input_name, state.datatype, shape, bytes(math.prod(shape) * itemsize))

    def fields(self, payload: ExecutionRequest) -> tuple[int | str, bool, bool]:
        parameters = payload.parameters
        correlation_id = parameters.get("sequence_id", 0)
        if not isinstance(correlation_id, (int, str)) or isinstance(correlation_id, bool):
            correlation_id = 0
        control = self.corrid
        if control is not None and correlation_id not in (0, ""):
            given = "BYTES" if isinstance(correlation_id, str) else "UINT64"
            if (given == "BYTES") != (control.datatype == "BYTES"):
                raise invalid_arg(f"sequence batching control '{control.name}' data-type is '{given}', but model "
                                  f"'{self.model_name}' expects '{control.datatype}'")
        return correlation_id, parameters.get("sequence_start") is True, parameters.get("sequence_end") is True

    def _controls(self, correlation_id: int | str, start: bool, end: bool, ready: bool) -> list[Tensor]:
        tensors = []
        shape = self.shape
        for name, datatype, kind, values, size in self._plan:
            if values is None:  # CORRID
                if not size:
                    text = str(correlation_id).encode() if correlation_id not in (0, "") else b""
                    data = len(text).to_bytes(4, "little") + text
                else:  # (the id's low `size` bytes, as a cast of the 64-bit value gives them)
                    value = int(correlation_id) if isinstance(correlation_id, int) else 0
                    data = (value & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")[:size]
            else:
                flag = start if kind is ControlKind.START else end if kind is ControlKind.END else ready
                data = values[1 if flag else 0]
            tensors.append(Tensor(name, datatype, shape, data))
        return tensors

    def prepare(self, payload: ExecutionRequest, correlation_id: int | str, start: bool, end: bool) -> ExecutionRequest:
        if self.policy.iterative:  # (the model sees the sequence's id, and no flag once its request was rescheduled)
            payload.iteration = (correlation_id, (1 if start else 0) | (2 if end else 0))
        if self.compact:
            names = self.names
            for tensor in payload.inputs:
                if tensor.name in names:  # a client cannot set a control itself
                    payload.inputs = [t for t in payload.inputs if t.name not in names]
                    break
            payload.sequence = SEQUENCE_CONTROLS
            return payload
        if not self.policy.controls:
            return payload
        inputs = [t for t in payload.inputs if t.name not in self.names]  # a client cannot set a control itself
        return dataclasses.replace(payload, inputs=inputs + self._controls(correlation_id, start, end, True))

    # ---- implicit state ----------------------------------------------------------------------------
    def client_view(self, payload: ExecutionRequest) -> list[str]:
        """The outputs the client asked for (none: all of the config's)."""
        return list(payload.requested_outputs)

    def prepare_state(self, payload: ExecutionRequest, correlation_id: int | str, start: bool, end: bool,
                      state: dict[str, Tensor] | None) -> ExecutionRequest:
        """`prepare`, with the state inputs (the initial state on START or when none is kept) and the state outputs
        asked of the model."""
        prepared = self.prepare(payload, correlation_id, start, end)
        inputs = [t for t in prepared.inputs if t.name not in self.initial]
        for name, initial in self.initial.items():
            inputs.append((state or {}).get(name, initial))
        requested = list(payload.requested_outputs) or list(self.outputs)
        requested += [name for name in self.state_outputs if name not in requested]
        return dataclasses.replace(prepared, inputs=inputs, requested_outputs=requested)

    def keep_state(self, view: list[str], result: Any, state: dict[str, Tensor] | None) -> dict[str, Tensor] | None:
        """The state tensors of `result` (copied: its buffers go back with the response) over `state`; the state
        outputs the client did not ask for are taken out of the result."""
        if not isinstance(result, ExecutionOutput) or result.error:
            return state
        outputs = result.outputs
        kept = dict(state or {})
        shown = []
        for tensor in outputs:
            spec = self.state_outputs.get(tensor.name)
            if spec is None:
                shown.append(tensor)
                continue
            if tensor.data is not None:
                kept[spec.input_name] = Tensor(spec.input_name, tensor.datatype, tuple(tensor.shape),
                                               bytes(tensor.data))
            if tensor.name in (view or self.outputs):
                shown.append(tensor)
        result.outputs = shown
        return kept

    def null(self, payload: ExecutionRequest) -> ExecutionRequest:
        if self.compact:  # (one request per outputs asked: nothing changes a not-ready row's payload)
            asked = tuple(payload.requested_outputs)
            null = self._nulls.get(asked)
            if null is None:
                null = ExecutionRequest([], {}, list(asked), {}, {}, sequence=SEQUENCE_CONTROLS | SEQUENCE_NOT_READY)
                if len(self._nulls) >= 64:
                    self._nulls.clear()
                self._nulls[asked] = null
            return null
        inputs = []
        for tensor in payload.inputs:
            if tensor.name in self.names:
                continue
            key = (tensor.datatype, tuple(tensor.shape))
            zeros = self._zeros.get(key)
            if zeros is None:
                count = math.prod(tensor.shape)
                itemsize = 4 if tensor.datatype == "BYTES" else np.dtype(TRITON_TO_NUMPY[tensor.datatype]).itemsize
                zeros = bytes(count * itemsize)  # (zero BYTES elements: each an empty string)
                if len(self._zeros) >= 64:
                    self._zeros.clear()
                self._zeros[key] = zeros
            inputs.append(Tensor(tensor.name, tensor.datatype, tensor.shape, zeros))
        states = list(self.initial.values())  # (a not-ready request's state: the initial one; its answer is dropped)
        requested = list(payload.requested_outputs)
        if requested:
            requested += [name for name in self.state_outputs if name not in requested]
        return ExecutionRequest(inputs + self._controls(0, False, False, False) + states, {}, requested, {}, {})


def scheduler_for(config: TritonModelConfig) -> Callable[..., ModelScheduler]:
    """What builds the scheduler of `config`'s model, called as `ModelScheduler` is: `ModelScheduler` itself, or for
    a stateful model a `SequenceScheduler` (the batching and pipeline depth passed follow from its sequence batcher
    instead)."""
    policy = config.sequence_batcher
    if policy is None:
        return ModelScheduler

    def make(model_name: str, _batching: Any, _depth: int, execution_timeout_s: float | None,
             on_execution: Callable[[ExecutionStats], None] | None = None, queueing: Any = None,
             preserve_ordering: bool = False) -> ModelScheduler:
        # (`queueing`: a dynamic batcher's queue policy; a stateful model has none, as sequence and dynamic batching
        # exclude each other in Triton's configuration)
        controls = SequenceControls(model_name, policy, config.max_batch_size, [o.name for o in config.outputs])
        return SequenceScheduler(model_name, policy, config.max_batch_size, controls, execution_timeout_s, on_execution)

    return make


__all__ = ["SequenceControls", "scheduler_for"]
