import json
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            params = json.loads(request.parameters())
            if params.get("started"):  # the test waits for this file: the request is inside the model
                open(params["started"], "w").close()
            deadline = time.monotonic() + float(params.get("seconds", 30))
            seen = False
            while time.monotonic() < deadline:
                if request.is_cancelled():
                    seen = True
                    break
                time.sleep(0.01)
            if seen and params.get("marker"):  # written whole, then renamed: a reader never sees it half-made
                with open(params["marker"] + ".tmp", "w") as f:
                    f.write("cancelled")
                os.replace(params["marker"] + ".tmp", params["marker"])
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
        return responses
