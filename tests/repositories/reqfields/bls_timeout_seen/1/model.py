"""Calls seen_timeout through BLS with the timeout its request parameter `bls_timeout` says (microseconds) and answers
what seen_timeout saw (Triton's qa bls test_timeout gives 11000000000: 11 s, more than 32 bits hold)."""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            timeout = int(json.loads(request.parameters()).get("bls_timeout", 0))
            answer = pb_utils.InferenceRequest(model_name="seen_timeout", inputs=[], requested_output_names=["TIMEOUT"],
                                               timeout=timeout).exec()
            responses.append(pb_utils.InferenceResponse(error=answer.error()) if answer.has_error()
                             else pb_utils.InferenceResponse(answer.output_tensors()))
        return responses
