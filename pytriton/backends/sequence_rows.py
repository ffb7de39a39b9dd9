"""Worker side of the sequence batcher: the control inputs of a batch's rows, added here from the flags the rows carry.

For a model without implicit state the server sends each request of a sequence batch as the client sent it, flagged
FLAG_SEQUENCE_CONTROLS, and a not-ready row (an empty slot of a Direct batch) as a bare FLAG_NOT_READY row (see
core/sequence_controls). Here each row gets its control inputs, after its own inputs, in the order the sequence
batcher lists them: START / END from the request's flags, READY true, CORRID its correlation id; a not-ready row gets
zero inputs shaped as the batch's first ready row's, START / END / READY false and CORRID 0. A model sees what
Triton hands it; the request's `flags` it sees are the client's (START 1, END 2) only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytriton.model_config.datatypes import TRITON_TO_NUMPY
from pytriton.model_config.sequence import ControlKind
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.messages import CLIENT_FLAGS, FLAG_NOT_READY, FLAG_SEQUENCE_CONTROLS
from pytriton.proxy.types import Request

_CACHED = 4096  # correlation ids whose CORRID array is kept (and zero arrays by dtype and shape)


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False  # (shared by every row that gets it, as inputs are read-only views anyway)
    return array


class SequenceRows:
    """Completes the flagged rows of a batch for one model's sequence batcher."""

    def __init__(self, config: TritonModelConfig):
        policy = config.sequence_batcher
        if policy is None:
            raise ValueError(f"model '{config.model_name}' has no sequence batcher")
        self.model_name = config.model_name
        self.shape = (1, 1) if config.max_batch_size > 0 else (1,)
        self.names = {control.name for control in policy.controls}
        # per control: (name, kind, (false array, true array) or None for CORRID, CORRID's numpy dtype or None: BYTES)
        self._plan: list[tuple[str, ControlKind, tuple[np.ndarray, np.ndarray] | None, Any]] = []
        for control in policy.controls:
            if control.kind is ControlKind.CORRID:
                dtype = None if control.datatype == "BYTES" else np.dtype(TRITON_TO_NUMPY[control.datatype])
                self._plan.append((control.name, control.kind, None, dtype))
            else:
                dtype = TRITON_TO_NUMPY[control.datatype]
                false, true = (_frozen(np.full(self.shape, value, dtype=dtype)) for value in control.false_true)
                self._plan.append((control.name, control.kind, (false, true), None))
        # a ready row's controls by its START / END flags (1, 2), in the controls' order; CORRID (if any) set after
        self._ready: list[dict[str, Any]] = []
        self._corrid_plan: tuple[str, Any] | None = None
        for flags in range(4):
            controls: dict[str, Any] = {}
            for name, kind, values, dtype in self._plan:
                if values is None:
                    controls[name] = None
                    self._corrid_plan = (name, dtype)
                else:
                    flag = flags & 1 if kind is ControlKind.START else flags & 2 if kind is ControlKind.END else True
                    controls[name] = values[1] if flag else values[0]
            self._ready.append(controls)
        self._corrid: dict[int | str, np.ndarray] = {}
        self._zeros: dict[tuple[Any, tuple[int, ...]], np.ndarray] = {}
        self._not_ready: dict[tuple[Any, ...], dict[str, np.ndarray]] = {}  # a not-ready row's inputs, by their shapes

    def _corrid_array(self, correlation_id: int | str, dtype: Any) -> np.ndarray:
        array = self._corrid.get(correlation_id)
        if array is None:
            if dtype is None:  # BYTES: the id's text (an empty string for none)
                array = np.empty(self.shape, dtype=np.object_)
                array[...] = str(correlation_id).encode() if correlation_id not in (0, "") else b""
            else:  # the id's low bytes, as a cast of its 64-bit value gives them
                value = correlation_id if isinstance(correlation_id, int) else 0
                data = (value & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")[:dtype.itemsize]
                array = np.frombuffer(data, dtype=dtype).reshape(self.shape)
            if len(self._corrid) >= _CACHED:
                self._corrid.clear()
            self._corrid[correlation_id] = _frozen(array)
        return array

    def _zeros_like(self, array: Any) -> np.ndarray:
        key = (array.dtype, tuple(array.shape))
        zeros = self._zeros.get(key)
        if zeros is None:
            if array.dtype == np.object_:  # BYTES: empty strings
                zeros = np.empty(array.shape, dtype=np.object_)
                zeros[...] = b""
            else:
                zeros = np.zeros(array.shape, dtype=array.dtype)
            if len(self._zeros) >= 64:
                self._zeros.clear()
            self._zeros[key] = _frozen(zeros)
        return zeros

    def _not_ready_data(self, like: dict[str, Any]) -> dict[str, np.ndarray]:
        """A not-ready row's inputs: zeros shaped as `like`'s (a ready row's) inputs, then its controls (START, END,
        READY false, CORRID 0); kept per inputs' names, dtypes and shapes (each row gets a copy of the dict)."""
        names = self.names
        key = tuple((name, array.dtype, array.shape) for name, array in like.items() if name not in names)
        data = self._not_ready.get(key)
        if data is None:
            row = Request({name: self._zeros_like(array) for name, array in like.items() if name not in names})
            self._add_controls(row, False, False, False)
            data = row.data
            if len(self._not_ready) >= 64:
                self._not_ready.clear()
            self._not_ready[key] = data
        return data

    def _add_controls(self, request: Request, start: bool, end: bool, ready: bool) -> None:
        data = request.data
        for name, kind, values, dtype in self._plan:
            if values is None:
                data[name] = self._corrid_array(request.correlation_id if ready else 0, dtype)
            else:
                flag = start if kind is ControlKind.START else end if kind is ControlKind.END else ready
                data[name] = values[1] if flag else values[0]

    def complete(self, requests: list[Request], failed: list[str]) -> tuple[list[Request], list[str]]:
        """Give the flagged rows of `requests` (the decoded ones; `failed` per row of the message: "" for those
        decoded, in order) their control inputs; a not-ready row its zero inputs. Returns them and `failed` (a
        not-ready row without a ready row to shape it on fails: it is a row nobody waits for)."""
        template = next((r for r in requests if not r.flags & FLAG_NOT_READY), None)
        if template is None and any(r.flags & FLAG_NOT_READY for r in requests):
            kept: list[Request] = []
            rows = iter(requests)
            failed = list(failed)
            for index, error in enumerate(failed):
                if error:
                    continue
                request = next(rows)
                if request.flags & FLAG_NOT_READY:
                    failed[index] = f"a not-ready row of model '{self.model_name}' without a ready row in its batch"
                else:
                    kept.append(request)
            requests = kept
        not_ready = None  # (the batch's not-ready inputs, made once)
        ready_controls = self._ready
        corrid = self._corrid_plan
        for request in requests:
            flags = request.flags
            if not flags & FLAG_SEQUENCE_CONTROLS:
                continue
            request.flags = flags & CLIENT_FLAGS
            if flags & FLAG_NOT_READY:
                if not_ready is None:
                    assert template is not None
                    not_ready = self._not_ready_data(template.data)
                request.data = not_ready.copy()
                request.correlation_id = 0
            else:  # (as _add_controls(request, START, END, True) sets them)
                data = request.data
                data.update(ready_controls[flags & 3])
                if corrid is not None:
                    data[corrid[0]] = self._corrid_array(request.correlation_id, corrid[1])
        return requests, failed

    @staticmethod
    def not_ready(message: Any) -> list[int]:
        """The rows of an INFER message that are not-ready rows (their answers are not wanted)."""
        return [index for index, item in enumerate(message.requests) if item.flags & FLAG_NOT_READY]


def sequence_rows(config: TritonModelConfig) -> SequenceRows | None:
    """The `SequenceRows` of a model whose sequence batcher has controls, else None."""
    policy = config.sequence_batcher
    if policy is None or not policy.controls:
        return None
    return SequenceRows(config)
