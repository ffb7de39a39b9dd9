"""Answers with the shapes it was given (SEEN: X's shape, then S's), X's first row (Y) and X scaled by S (Z), in the
shapes its config.pbtxt's reshapes give them."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            s = pb_utils.get_input_tensor_by_name(request, "S").as_numpy()
            seen = np.array([list(x.shape) + list(s.shape)] * x.shape[0], dtype=np.int64)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SEEN", seen),
                pb_utils.Tensor("Y", np.ascontiguousarray(x[:, 0])),
                pb_utils.Tensor("Z", x * s[:, None, None, None]),
            ]))
        return responses
