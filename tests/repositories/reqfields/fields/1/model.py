import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seen = {"request_id": request.request_id(), "correlation_id": request.correlation_id(),
                    "flags": request.flags()}
            out = np.array([json.dumps(seen).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("FIELDS", out)]))
        return responses
