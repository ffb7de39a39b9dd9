"""Loads the model its config's parameter LOAD names from initialize() (as Triton's README shows: a BLS model
loading what it calls), unless it is ready; Y = X through it."""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.target = config["parameters"]["LOAD"]["string_value"]
        if not pb_utils.is_model_ready(self.target):
            pb_utils.load_model(self.target)

    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(model_name=self.target, requested_output_names=["Y"],
                                             inputs=[pb_utils.get_input_tensor_by_name(request, "X")])
            answer = call.exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            responses.append(pb_utils.InferenceResponse([pb_utils.get_output_tensor_by_name(answer, "Y")]))
        return responses
