"""Y = X, or for X[0] = 2 an error response of code INVALID_ARG, or for X[0] = 3 an exception from execute."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x[0] == 3:
                raise ValueError("X[0] is 3")
            if x[0] == 2:
                error = pb_utils.TritonError("X[0] is 2", pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array(x))]))
        return responses
