import json
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            deadline = time.monotonic() + float(json.loads(request.parameters()).get("seconds", 0))
            while time.monotonic() < deadline and not request.is_cancelled():
                time.sleep(0.01)
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
        return responses
