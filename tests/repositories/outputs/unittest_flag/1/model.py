"""OUTPUT0 = [1] as float16, though config.pbtxt declares FP32 [16]: the answer of Triton's QA models that run a
unittest suite inside the model and report test.result.wasSuccessful()."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.array([True], dtype=np.float16))])
                for _ in requests]
