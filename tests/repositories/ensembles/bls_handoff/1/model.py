"""Calls ens_times_two with a tensor of its own (BLS) and answers where the callee read it from (its SOURCE)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy() + np.float32(1)
            call = pb_utils.InferenceRequest(model_name="ens_times_two", inputs=[pb_utils.Tensor("INPUT0", x)],
                                             requested_output_names=["SOURCE"])
            answer = call.exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            source = pb_utils.get_output_tensor_by_name(answer, "SOURCE").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SOURCE", source)]))
        return responses
