"""Answers, per request, ORDER (how many executions ran, this one included), BATCH (how many requests this execution
holds) and NAMES (the request's input names, comma-separated), in Triton's own Python-backend API, for the batching
comparisons of tests/e2e/test_triton_parity_queue.py. A request with the string parameter 'started' (a file path)
creates that file when it starts; with 'release' (a file path) it is held until that file exists (at most 30 s)."""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.runs = 0

    def execute(self, requests):
        self.runs += 1
        responses = []
        for request in requests:
            parameters = json.loads(request.parameters() or "{}")
            if "started" in parameters:
                open(parameters["started"], "w").close()
            deadline = time.monotonic() + 30
            while "release" in parameters and not os.path.exists(parameters["release"]) \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
            names = ",".join(sorted(tensor.name() for tensor in request.inputs()))
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("ORDER", np.array([[self.runs]], np.int64)),
                pb_utils.Tensor("BATCH", np.array([[len(requests)]], np.int64)),
                pb_utils.Tensor("NAMES", np.array([[names.encode()]], np.object_))]))
        return responses
