"""A model served by file path (`path/to/model_file.py:fn`): it imports a module next to it."""

import numpy as np
from sibling_helper import triple

from pytriton.model_config import Tensor, triton_model


@triton_model(inputs=[Tensor(name="IN", dtype=np.int32, shape=(-1,))],
              outputs=[Tensor(name="OUT", dtype=np.int32, shape=(-1,))])
def fn(requests):
    return [{"OUT": triple(r["IN"])} for r in requests]
