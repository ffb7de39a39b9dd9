"""Y = X, Y2 = 2 X and RUNS = how many times execute() ran, in Triton's own Python-backend API, for the
response-cache comparisons (tests/e2e/test_triton_parity_cache.py): an answer whose RUNS is that of an earlier one
came from the cache. The optional BYTES input S is read and ignored. X's first element below 0 makes the response an
error that names the run ("negative X (run N)")."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.runs = 0

    def execute(self, requests):
        self.runs += 1
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x.size and x.flat[0] < 0:
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"negative X (run {self.runs})")))
                continue
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("Y", x), pb_utils.Tensor("Y2", x * 2),
                pb_utils.Tensor("RUNS", np.array([self.runs], np.int64))]))
        return responses
