"""Y = X and ORDER = how many requests this instance ran (this one included), in Triton's own Python-backend API, for
the queue-policy comparisons (tests/e2e/test_triton_parity_queue.py). A request with the string parameter 'started'
(a file path) creates that file when it starts; with 'release' (a file path) it is held until that file exists (at
most 30 s): a test keeps the one instance busy so that what it sends next waits in the queue."""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.runs = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            parameters = json.loads(request.parameters() or "{}")
            if "started" in parameters:
                open(parameters["started"], "w").close()
            deadline = time.monotonic() + 30
            while "release" in parameters and not os.path.exists(parameters["release"]) \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
            self.runs += 1
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("Y", x), pb_utils.Tensor("ORDER", np.full(x.shape, self.runs, np.int64))]))
        return responses
