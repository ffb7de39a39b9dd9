"""Y = 2 * X, computed where X lies; WHERE says where that was ("cpu" or "gpu")."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X")
            if x.is_cpu():
                y = pb_utils.Tensor("Y", x.as_numpy() * 2)
            else:
                import cupy

                y = pb_utils.Tensor.from_dlpack("Y", cupy.from_dlpack(x.to_dlpack()) * 2)
            where = np.array([b"cpu" if x.is_cpu() else b"gpu"], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([y, pb_utils.Tensor("WHERE", where)]))
        return responses
