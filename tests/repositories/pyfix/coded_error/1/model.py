"""Each request is answered with an error response whose TritonError code the input CODE gives (< 0: no code)."""

import triton_python_backend_utils as pb_utils


def coded_error(request):
    code = int(request.get_input_tensor_by_name("CODE").as_numpy()[0])
    message = f"refused with code {code}"
    error = pb_utils.TritonError(message) if code < 0 else pb_utils.TritonError(message, code)
    return pb_utils.InferenceResponse(error=error)


class TritonPythonModel:
    def execute(self, requests):
        return [coded_error(request) for request in requests]
