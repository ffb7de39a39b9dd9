"""Triton's classification extension: an output replaced by its top-k "value:index[:label]" strings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pytriton.core.types import InferRequest, Tensor
from pytriton.exceptions import invalid_arg
from pytriton.model_config.datatypes import TRITON_TO_NUMPY, serialize_bytes_tensor

if TYPE_CHECKING:
    from pytriton.model_config.triton_model_config import TritonModelConfig

MAX_ELEMENTS = 1_000_000


def _format(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{float(value):f}"  # std::to_string prints floats with 6 decimals
    return str(int(value))


def classify(tensor: Tensor, count: int, batched: bool, labels: list[str] | None = None) -> Tensor:
    """Top-`count` classes of `tensor` (per batch row when `batched`), as a BYTES tensor."""
    if tensor.datatype in ("BYTES",) or tensor.datatype not in TRITON_TO_NUMPY:
        raise invalid_arg(f"class result not available for output '{tensor.name}' due to unsupported type 'BYTES'")
    array: np.ndarray = np.frombuffer(tensor.data, dtype=TRITON_TO_NUMPY[tensor.datatype]).reshape(tensor.shape)
    if array.size > MAX_ELEMENTS:
        raise invalid_arg("classification output tensor too large")
    leading: int = array.shape[0] if batched and array.ndim else 1
    rows: np.ndarray = array.reshape(leading, -1)
    if rows.dtype == np.bool_ or rows.dtype.itemsize == 2 and rows.dtype.kind == "V":
        rows = rows.astype(np.float32)
    k = min(count, rows.shape[1]) if rows.size else 0
    strings = []
    for row in rows:
        order = np.argsort(-row.astype(np.float64), kind="stable")[:k]
        for index in order:
            text = f"{_format(row[index])}:{int(index)}"
            if labels is not None and index < len(labels):
                text += f":{labels[index]}"
            strings.append(text.encode())
    out = np.array(strings, dtype=object)
    shape = (rows.shape[0], k) if batched else (k,)
    return Tensor(tensor.name, "BYTES", shape, serialize_bytes_tensor(out))


def classify_outputs(config: TritonModelConfig, request: InferRequest, outputs: list[Tensor]) -> list[Tensor]:
    """`outputs` with those the request asks to classify replaced by their classification."""
    counts = {o.name: int(o.parameters["classification"]) for o in request.outputs if "classification" in o.parameters}
    return [classify(t, counts[t.name], config.batching, config.labels.get(t.name)) if t.name in counts else t
            for t in outputs]
