"""The chaos soak's arithmetic model (Triton Python backend): OUTPUT0 = INPUT0 * MUL + ADD, MUL and ADD from the
configuration's parameters (double: 2x; plus_one: x + 1; times_two: 2x).

A request whose parameter "hold_model" names this model holds its execution: the worker writes its pid into the
file "hold_file" names (a plain file name, in the folder the configuration's parameter HOLD_DIR names) and sleeps
"hold_s" seconds (at most 60), so that the soak can kill it while it is known to be inside a request."""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils

MAX_HOLD_S = 60.0


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.name = config["name"]
        self.mul = np.float32(params["MUL"])
        self.add = np.float32(params["ADD"])
        self.hold_dir = params["HOLD_DIR"]

    def _hold(self, parameters):
        if parameters.get("hold_model") != self.name:
            return
        name = os.path.basename(str(parameters.get("hold_file", "")))
        if not name:
            return
        path = os.path.join(self.hold_dir, name)
        with open(path + ".tmp", "w") as file:
            file.write(str(os.getpid()))
        os.replace(path + ".tmp", path)
        time.sleep(min(float(parameters.get("hold_s", 0)), MAX_HOLD_S))

    def execute(self, requests):
        responses = []
        for request in requests:
            self._hold(json.loads(request.parameters()))
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            y = (x * self.mul + self.add).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", y)]))
        return responses
