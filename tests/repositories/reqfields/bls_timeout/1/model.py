import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            params = json.loads(request.parameters())
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            response = pb_utils.InferenceRequest(
                model_name="double", inputs=[pb_utils.Tensor("X", x)], requested_output_names=["Y"],
                parameters={"seconds": params.get("seconds", 0)}, timeout=int(params.get("timeout_us", 0))).exec()
            if response.has_error():
                error = f"{response.error().code()}: {response.error().message()}"
                outputs = [pb_utils.Tensor("Y", x), pb_utils.Tensor("ERROR", np.array([error.encode()], np.object_))]
            else:
                y = pb_utils.get_output_tensor_by_name(response, "Y").as_numpy()
                outputs = [pb_utils.Tensor("Y", y), pb_utils.Tensor("ERROR", np.array([b""], np.object_))]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
