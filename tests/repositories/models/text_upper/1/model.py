"""BYTES in, BYTES out (upper case); a request holding b"fail" gets an error response of its own."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = request.get_input_tensor_by_name("TEXT").as_numpy()
            if b"fail" in list(text):
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("text_upper refuses 'fail'", pb_utils.TritonError.INVALID_ARG)))
                continue
            suffix = json.loads(request.parameters()).get("suffix", "").encode()
            upper = np.array([t.upper() + suffix for t in text], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("UPPER", upper)]))
        return responses
