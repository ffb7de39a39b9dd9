"""Answers its own version number (1)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.version = int(args["model_version"])

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("VERSION", np.array([self.version], dtype=np.int32))])
                for _ in requests]

    def finalize(self):
        pb_utils.Logger.log_info(f"versioned version {self.version} finalized")
