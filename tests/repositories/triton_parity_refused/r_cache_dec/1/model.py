"""A decoupled model with the response cache enabled: tritonserver 2.51 refuses to load it
(tests/e2e/test_triton_parity_cache.py). Were it loaded, it would answer Y = X once and end the request."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(
                request, "X").as_numpy())]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
