"""TIMEOUT = request.timeout(): the request's timeout in microseconds (the client's `timeout` parameter, or a BLS
caller's `timeout`), 0 when none was given."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("TIMEOUT", np.array([r.timeout()], np.int64))])
                for r in requests]
