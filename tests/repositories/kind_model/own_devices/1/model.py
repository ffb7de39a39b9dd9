"""Answers what a KIND_MODEL instance sees: CUDA_VISIBLE_DEVICES ('<unset>' when it is not set) and the instance's
kind, name and device id as initialize() got them."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.seen = [args["model_instance_kind"], args["model_instance_name"], args["model_instance_device_id"]]

    def execute(self, requests):
        env = np.array([os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"), *self.seen], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("ENV", env.astype(np.bytes_).astype(np.object_))])
                for _ in requests]
