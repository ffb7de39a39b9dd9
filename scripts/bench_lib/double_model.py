"""The benchmark model as a Triton Python-backend model (y = 2x, FP32): serve_double.py's callable as `model.py`.

`repo_double.write_repository` copies it into a model repository (one folder per model, `config.pbtxt` written
there) that `pytriton serve --model-repository` serves, for the bench's "repository model" row.
"""

import numpy as np
import triton_python_backend_utils as pb_utils

TWO = np.float32(2)


class TritonPythonModel:
    def execute(self, requests):
        # (pb_utils.get_input_tensor_by_name(request, name): the function Triton's Python backend has; its
        # InferenceRequest has no such method)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", pb_utils.get_input_tensor_by_name(
            request, "INPUT").as_numpy() * TWO)]) for request in requests]
