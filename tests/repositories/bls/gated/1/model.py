"""OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, once released: creates the file named by the "started"
parameter, then waits (up to 30 s) until the file named by "release" exists."""

import json
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            parameters = json.loads(request.parameters())
            with open(parameters["started"], "w"):
                pass
            deadline = time.monotonic() + 30
            while not os.path.exists(parameters["release"]) and time.monotonic() < deadline:
                time.sleep(0.01)
            a = request.get_input_tensor_by_name("INPUT0").as_numpy()
            b = request.get_input_tensor_by_name("INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a + b),
                                                         pb_utils.Tensor("OUTPUT1", a - b)]))
        return responses
