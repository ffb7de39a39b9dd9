"""x * 10, and REQUESTS: how many requests this execution held (the dynamic batcher's work)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        count = np.array([[len(requests)]], dtype=np.int32)
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", (x * 10).astype(np.float32)),
                pb_utils.Tensor("REQUESTS", np.repeat(count, len(x), axis=0)),
            ]))
        return responses
