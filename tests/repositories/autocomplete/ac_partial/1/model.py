"""A partial config.pbtxt (input TEXT without a data type, no output) completed by auto_complete_config, which reads
the configuration (as_dict) to keep what it says; a non-batching model: each string gets the `suffix` parameter."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        config = auto_complete_model_config.as_dict()
        assert config["parameters"]["suffix"]["string_value"] == "!", config
        auto_complete_model_config.add_input({"name": "TEXT", "data_type": "TYPE_STRING", "dims": [-1]})
        auto_complete_model_config.add_output({"name": "SHOUTED", "data_type": "TYPE_STRING", "dims": [-1]})
        auto_complete_model_config.set_max_batch_size(0)
        return auto_complete_model_config

    def initialize(self, args):
        self.suffix = json.loads(args["model_config"])["parameters"]["suffix"]["string_value"].encode()

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            out = np.array([t.upper() + self.suffix for t in text], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SHOUTED", out)]))
        return responses
