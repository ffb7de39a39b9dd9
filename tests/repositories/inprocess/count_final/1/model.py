"""Decoupled: answers 1..N for IN = N, sending the last response with TRITONSERVER_RESPONSE_COMPLETE_FINAL (N = 0:
the final flag alone)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            count = int(request.get_input_tensor_by_name("IN").as_numpy()[0])
            if count == 0:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            for value in range(1, count + 1):
                response = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))])
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if value == count else 0)
