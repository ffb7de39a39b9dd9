"""Decoupled and slow: each element of IN is its own response, 0.2 s apart; stops early when cancelled."""

import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            for value in request.get_input_tensor_by_name("IN").as_numpy():
                if request.is_cancelled():
                    break
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))]))
                time.sleep(0.2)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
