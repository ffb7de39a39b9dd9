"""`Tensor`: how a model input or output is declared in `Triton.bind`."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Type, Union

import numpy as np


@dataclasses.dataclass(frozen=True)
class Tensor:
    """A model input or output: shape without the batch dimension (-1 = variable), numpy dtype, name."""

    shape: tuple[Any, ...]
    dtype: Union[np.dtype, Type[np.dtype], Type[object]]
    name: Optional[str] = None
    optional: Optional[bool] = False

    def __post_init__(self) -> None:
        if isinstance(self.dtype, np.dtype):
            object.__setattr__(self, "dtype", self.dtype.type)
