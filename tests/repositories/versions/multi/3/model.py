"""Version 3 of 'multi': answers X + 100 * its version folder's number, so an answer tells which version ran.

A request with the string parameter 'hold_until' (a file path) is held, after a log line saying so, until that file
exists (at most 20 s): a test can keep it in flight while the server swaps versions."""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FOLDER_VERSION = 3


class TritonPythonModel:
    def initialize(self, args):
        assert int(args["model_version"]) == FOLDER_VERSION, args["model_version"]

    def execute(self, requests):
        responses = []
        for request in requests:
            hold_until = json.loads(request.parameters() or "{}").get("hold_until")
            if hold_until:
                pb_utils.Logger.log_info(f"multi version {FOLDER_VERSION} holds a request")
                deadline = time.monotonic() + 20
                while not os.path.exists(hold_until) and time.monotonic() < deadline:
                    time.sleep(0.02)
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            answer = (x + 100 * FOLDER_VERSION).astype(np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("VERSION", answer)]))
        return responses
