"""Logs one line of each pb_utils.Logger level, naming the request's TAG, and answers Y = TAG."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tag = pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy()
            name = tag[0].decode()
            pb_utils.Logger.log_info(f"{name} info")
            pb_utils.Logger.log_warn(f"{name} warning")
            pb_utils.Logger.log(f"{name} error", pb_utils.Logger.ERROR)
            pb_utils.Logger.log_verbose(f"{name} verbose")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", tag)]))
        return responses
