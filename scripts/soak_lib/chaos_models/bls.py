"""The chaos soak's BLS model (Triton Python backend): calls `double` with exec() (its own parameters passed on,
so that a hold reaches the callee) and answers OUTPUT0 = double's answer + 1, i.e. 2x + 1; the callee's error is
answered as this request's error, its message kept."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="double", inputs=[pb_utils.get_input_tensor_by_name(request, "INPUT0")],
                requested_output_names=["OUTPUT0"], parameters=json.loads(request.parameters()))
            answer = call.exec()
            if answer.has_error():
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"bls: double failed: {answer.error().message()}")))
                continue
            y = pb_utils.get_output_tensor_by_name(answer, "OUTPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", (y + np.float32(1)).astype(np.float32))]))
        return responses
