import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if (x == -1).any():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("minus one")))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
        return responses
