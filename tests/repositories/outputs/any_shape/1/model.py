"""Answers each request with one output (its parameter "output") of the shape its parameter "shape" lists
("1,2,3"; "" for a scalar), zeros, whatever dims config.pbtxt declares for it."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            asked = json.loads(request.parameters())
            shape = [int(dim) for dim in asked["shape"].split(",") if dim]
            output = pb_utils.Tensor(asked["output"], np.zeros(shape, dtype=np.float32))
            responses.append(pb_utils.InferenceResponse([output]))
        return responses
