"""A + B."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = request.get_input_tensor_by_name("A").as_numpy()
            b = request.get_input_tensor_by_name("B").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", a + b)]))
        return responses
