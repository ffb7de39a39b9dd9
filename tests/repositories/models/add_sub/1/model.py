"""Adds and subtracts two FP32 vectors; a second output reports the batch size execute() saw (in a parameter)."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException("add_sub must not be decoupled")
        self.scale = float(config["parameters"]["scale"]["string_value"])
        self.dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "OUTPUT0")["data_type"])
        self.args = args

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = request.get_input_tensor_by_name("INPUT1").as_numpy()
            out0 = pb_utils.Tensor("OUTPUT0", ((a + b) * self.scale).astype(self.dtype))
            out1 = pb_utils.Tensor("OUTPUT1", ((a - b) * self.scale).astype(self.dtype))
            responses.append(pb_utils.InferenceResponse(
                output_tensors=[out0, out1],
                parameters={"batch": len(requests), "instance": self.args["model_instance_name"]}))
        return responses

    def finalize(self):
        pb_utils.Logger.log_info("add_sub finalized")
