"""An accumulator that keeps nothing itself: OUTPUT = OUTPUT_STATE = INPUT_STATE + INPUT (the server keeps the state
between the requests of a sequence); GOT_STATE echoes the state it was given, PID its process."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            state = pb_utils.get_input_tensor_by_name(request, "INPUT_STATE").as_numpy()
            total = (state.reshape(-1)[:1] + value.reshape(-1)[:1]).astype(np.int32).reshape(1, 1)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT", total),
                pb_utils.Tensor("OUTPUT_STATE", total),
                pb_utils.Tensor("GOT_STATE", state.astype(np.int32).reshape(1, -1)[:, :1]),
                pb_utils.Tensor("PID", np.array([[os.getpid()]], dtype=np.int64)),
            ]))
        return responses
