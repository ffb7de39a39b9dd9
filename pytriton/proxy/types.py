"""What an inference callable receives and returns."""

from __future__ import annotations

from collections.abc import ItemsView, KeysView, ValuesView
from typing import Any, Dict, Iterator, List, Optional, Union

import numpy as np


class Request:
    """One inference request: input arrays by name, request parameters and forwarded headers.

    Behaves as a mapping of input name to array, as in PyTriton (`request["INPUT"]`). Arrays of fixed-size
    datatypes are read-only views on shared memory, valid until the callable returns.
    """

    __slots__ = ("data", "parameters", "span", "requested_output_names", "request_id", "correlation_id", "flags")

    def __init__(
        self,
        data: Dict[str, np.ndarray],
        parameters: Optional[Dict[str, Union[str, int, bool, float]]] = None,
        span: Any = None,
        requested_output_names: Optional[List[str]] = None,
        request_id: str = "",
        correlation_id: Union[int, str] = 0,
        flags: int = 0,
    ):
        self.data = data
        self.parameters = parameters if parameters is not None else {}
        self.span = span
        self.requested_output_names = requested_output_names
        self.request_id = request_id  # the client's request id ("" when it sent none)
        self.correlation_id = correlation_id  # the sequence id: `parameters["sequence_id"]`, 0 when none
        self.flags = flags  # sequence start (1) and end (2), from `parameters["sequence_start"/"sequence_end"]`

    def __getitem__(self, name: str) -> np.ndarray:
        return self.data[name]

    def __setitem__(self, name: str, value: np.ndarray) -> None:
        self.data[name] = value

    def __delitem__(self, name: str) -> None:
        del self.data[name]

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __contains__(self, name: object) -> bool:
        return name in self.data

    def keys(self) -> KeysView[str]:
        return self.data.keys()

    def values(self) -> ValuesView[np.ndarray]:
        return self.data.values()

    def items(self) -> ItemsView[str, np.ndarray]:
        return self.data.items()

    def get(self, name: str, default: Any = None) -> Any:
        return self.data.get(name, default)

    def __repr__(self) -> str:
        shapes = {k: (v.dtype.name, v.shape) for k, v in self.data.items()}
        return f"Request(data={shapes}, parameters={self.parameters})"


Requests = List[Request]
Response = Dict[str, np.ndarray]
Responses = List[Response]

__all__ = ["Request", "Requests", "Response", "Responses"]
