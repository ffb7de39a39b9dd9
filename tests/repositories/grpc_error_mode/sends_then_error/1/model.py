"""A decoupled model: for each request Y = X, then an error response, then the final flag alone; for X[0] = 3,
execute raises instead."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x[0] == 3:
                raise ValueError("X[0] is 3")
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array(x))]))
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("sent after Y")))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
