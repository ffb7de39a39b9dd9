"""TOTAL = 1 + 2 + ... + N, accumulated in an np.array([0]) (int64), though config.pbtxt declares TYPE_INT32."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            total = np.array([0])
            for i in range(1, n + 1):
                total += i
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("TOTAL", total)]))
        return responses
