"""BYTES in, BYTES out: each element reversed."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            reversed_ = np.array([t[::-1] for t in text], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("REVERSED", reversed_)]))
        return responses
