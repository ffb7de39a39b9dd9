"""Triton's `model_warmup`: samples of requests each model instance runs after `initialize()` and before the model is
ready. A sample is `count` executions (at least one) of `batch_size` requests that share one set of input data:
zeros (`zero_data`), random bytes (`random_data`) or the bytes of a file of the model's `warmup/` folder
(`input_data_file`, read when the configuration is read and carried here)."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import numpy as np

from pytriton.model_config.datatypes import TRITON_TO_CONFIG, TRITON_TO_NUMPY, deserialize_bytes_tensor

SOURCES = ("zero_data", "random_data", "input_data_file")


@dataclasses.dataclass(frozen=True)
class WarmupInput:
    """One input of a sample: its Triton datatype, its dims (without the batch dimension) and where its data comes
    from (`source`, one of SOURCES); `data`: the file's bytes for `input_data_file`."""

    name: str
    datatype: str
    dims: tuple[int, ...]
    source: str
    file: str = ""
    data: bytes = b""

    def array(self, batched: bool, rng: np.random.Generator) -> np.ndarray:
        """The tensor each request of the sample gets: [1, *dims] for a batching model, dims otherwise."""
        shape = ((1,) if batched else ()) + self.dims
        count = int(np.prod(shape, dtype=np.int64))
        if self.datatype == "BYTES":  # (zero and random data: empty strings; a file: serialized elements)
            if self.source != "input_data_file":
                return np.full(shape, b"", dtype=np.object_)
            return deserialize_bytes_tensor(self.data)[:count].reshape(shape)
        dtype = TRITON_TO_NUMPY[self.datatype]
        if self.source == "zero_data":
            return np.zeros(shape, dtype)
        if self.source == "random_data":
            if self.datatype == "BOOL":
                return rng.integers(0, 2, size=shape).astype(np.bool_)
            return cast(np.ndarray, np.frombuffer(rng.bytes(count * dtype.itemsize), dtype).reshape(shape).copy())
        return cast(np.ndarray, np.frombuffer(self.data, dtype, count).reshape(shape).copy())

    def byte_size(self) -> int:
        """The bytes one request's tensor needs (Triton's check of a data file; BYTES: none)."""
        if self.datatype == "BYTES":
            return 0
        return int(np.prod(self.dims, dtype=np.int64)) * TRITON_TO_NUMPY[self.datatype].itemsize

    def to_triton_dict(self, with_data: bool = False) -> dict[str, Any]:
        entry: dict[str, Any] = {"data_type": TRITON_TO_CONFIG[self.datatype], "dims": list(self.dims)}
        if self.source == "input_data_file":
            entry["input_data_file"] = self.file
            if with_data:
                entry["data_hex"] = self.data.hex()  # (pytriton's own round trip to the worker: not Triton's field)
        else:
            entry[self.source] = True
        return entry


@dataclasses.dataclass(frozen=True)
class WarmupSample:
    """One `model_warmup` entry."""

    name: str
    batch_size: int
    count: int
    inputs: tuple[WarmupInput, ...]

    @property
    def executions(self) -> int:
        return max(self.count, 1)  # (Triton: 0, the default, runs it once)

    def to_triton_dict(self, with_data: bool = False) -> dict[str, Any]:
        return {"name": self.name, "batch_size": self.batch_size, "count": self.count,
                "inputs": {i.name: i.to_triton_dict(with_data) for i in self.inputs}}


def warmup_from_triton(entries: list[dict[str, Any]]) -> list[WarmupSample]:
    """Samples from Triton's JSON (`model_warmup`, as `to_triton_dict(with_data=True)` writes it)."""
    samples = []
    for entry in entries:
        inputs = []
        for name, spec in (entry.get("inputs") or {}).items():
            source = next((s for s in SOURCES if spec.get(s)), "zero_data")
            datatype = spec.get("data_type", "TYPE_FP32")
            inputs.append(WarmupInput(name, datatype[len("TYPE_"):].replace("STRING", "BYTES"),
                                      tuple(int(d) for d in spec.get("dims", [])), source,
                                      spec.get("input_data_file", ""), bytes.fromhex(spec.get("data_hex", ""))))
        samples.append(WarmupSample(entry.get("name", ""), int(entry.get("batch_size", 0)),
                                    int(entry.get("count", 0)), tuple(inputs)))
    return samples


__all__ = ["WarmupInput", "WarmupSample", "warmup_from_triton"]
