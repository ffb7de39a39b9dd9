"""A Python-based backend (Triton's term): every model whose config.pbtxt says `backend: "scale"` runs this file.
Its configuration comes from auto-complete; each model version's folder holds a model.json with its factor."""

import json
import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [-1]})
        config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]})
        config.set_max_batch_size(0)
        return config

    def initialize(self, args):
        with open(os.path.join(pb_utils.get_model_dir(), "model.json")) as file:
            self.factor = json.load(file)["factor"]
        self.where = f"{args['model_name']} {args['model_version']} {args['model_repository']}"

    def execute(self, requests):
        return [pb_utils.InferenceResponse(
            [pb_utils.Tensor("Y", request.get_input_tensor_by_name("X").as_numpy() * self.factor)],
            parameters={"where": self.where}) for request in requests]
