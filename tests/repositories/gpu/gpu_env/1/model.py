"""Answers CUDA_VISIBLE_DEVICES as its worker sees it, and the instance kind and device id initialize() got."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.kind = args["model_instance_kind"]
        self.device_id = args["model_instance_device_id"]

    def execute(self, requests):
        env = np.array([os.environ.get("CUDA_VISIBLE_DEVICES", "").encode(), self.kind.encode(),
                        self.device_id.encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("ENV", env)]) for _ in requests]
