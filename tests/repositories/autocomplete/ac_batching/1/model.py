"""No config.pbtxt: auto_complete_config declares everything (a batching model, dynamic batcher on); execute adds and
subtracts, and answers with the max_batch_size it was initialized with (from args["model_config"])."""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        for name in ("INPUT0", "INPUT1"):
            auto_complete_model_config.add_input({"name": name, "data_type": "TYPE_FP32", "dims": [4]})
        for name in ("SUM", "DIFF"):
            auto_complete_model_config.add_output({"name": name, "data_type": "TYPE_FP32", "dims": [4]})
        auto_complete_model_config.set_max_batch_size(16)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def initialize(self, args):
        self.max_batch_size = json.loads(args["model_config"])["max_batch_size"]

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("SUM", a + b), pb_utils.Tensor("DIFF", a - b)],
                parameters={"max_batch_size": self.max_batch_size}))
        return responses
