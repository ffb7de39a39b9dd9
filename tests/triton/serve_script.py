"""A user program: binds a model and serves until signalled (used by test_lifecycle)."""

import json
import sys

import numpy as np

from pytriton.decorators import batch
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig


@batch
def double(x):
    return {"y": x * 2}


config = TritonConfig(http_port=0, grpc_port=0, metrics_port=0, http_address="127.0.0.1", grpc_address="127.0.0.1",
                      metrics_address="127.0.0.1")
triton = Triton(config=config)
triton.bind("double", double, inputs=[Tensor(name="x", shape=(-1,), dtype=np.float32)],
            outputs=[Tensor(name="y", shape=(-1,), dtype=np.float32)], config=ModelConfig(max_batch_size=8))
triton.run()
print("INFO " + json.dumps(triton._info), flush=True)
if sys.argv[1:] == ["serve"]:
    triton.serve()
else:
    import time

    while True:
        time.sleep(1)
