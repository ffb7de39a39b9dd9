"""A Python-based backend named `identity` that does for Triton's QA configurations what Triton's C++ identity backend
(triton-inference-server/identity_backend) does, so that those configurations (`backend: "identity"`) are served
unchanged with `--backend-directory tests/_support/triton_qa_backends`:

- each requested output OUTPUTi (every output when none is named) is the request's INPUTi, or zeros shaped as the
  inputs given when the request left that optional input out;
- the model's `execute_delay_ms` parameter (config.pbtxt `parameters`) delays each execution by that many ms.
"""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        delay = config.get("parameters", {}).get("execute_delay_ms", {}).get("string_value", "0")
        self.delay_s = int(delay) / 1000.0
        self.outputs = {o["name"]: pb_utils.triton_string_to_numpy(o["data_type"]) for o in config["output"]}

    def execute(self, requests):
        if self.delay_s:
            time.sleep(self.delay_s)
        responses = []
        for request in requests:
            given = {t.name(): t.as_numpy() for t in request.inputs()}
            shape = next(iter(given.values())).shape if given else (0,)
            tensors = []
            for name in sorted(request.requested_output_names() or self.outputs):
                value = given.get("INPUT" + name[len("OUTPUT"):])
                if value is None:
                    value = np.zeros(shape, self.outputs[name])
                tensors.append(pb_utils.Tensor(name, value))
            responses.append(pb_utils.InferenceResponse(tensors))
        return responses
