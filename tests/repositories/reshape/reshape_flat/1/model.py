"""Reverses X as the flat vector it sees (its reshape), after checking it is one."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x.shape != (6,):
                raise pb_utils.TritonModelException(f"expected X as [6], got {list(x.shape)}")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("REVERSED", np.ascontiguousarray(x[::-1]))]))
        return responses
