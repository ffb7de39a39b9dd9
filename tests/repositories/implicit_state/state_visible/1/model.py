"""OUTPUT = INPUT_STATE[0] + INPUT; OUTPUT_STATE: the state grown by one element, [INPUT_STATE[0] + INPUT, ...]
(a state whose shape changes from request to request)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().reshape(-1)[0])
            state = pb_utils.get_input_tensor_by_name(request, "INPUT_STATE").as_numpy().reshape(-1)
            total = int(state[0]) + value
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT", np.array([total], dtype=np.int32)),
                pb_utils.Tensor("OUTPUT_STATE", np.concatenate([[total], state]).astype(np.int32)),
            ]))
        return responses
