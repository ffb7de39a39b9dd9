import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()
        if x[0] == 1:
            raise ValueError("raised in execute")
        if x[0] == 2:
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError("error response")) for _ in requests]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]) for _ in requests]
