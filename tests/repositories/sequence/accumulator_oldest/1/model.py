"""A stateful accumulator: START resets the sum, each ready request adds INPUT; the sum is kept per batch slot (Direct)
or per correlation id (Oldest, parameter "key_by": "corrid"). Echoes the control tensors as it received them, the
READY values of its whole batch, and its process id. A request with the parameter "gate" waits in execute for that
file (it first creates GATE.entered)."""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _get(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy()


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        batcher = config.get("sequence_batching", {})
        self.by_corrid = "oldest" in batcher
        self.true = {}  # control tensor -> its configured true value
        for entry in batcher.get("control_input", []):
            for control in entry["control"]:
                for field in ("int32_false_true", "fp32_false_true", "bool_false_true"):
                    if control.get(field):
                        self.true[control["kind"]] = (entry["name"], control[field][1])
        self.sums = {}

    def _is(self, request, kind):
        name, true = self.true[kind]
        return bool(_get(request, name).reshape(-1)[0] == true)

    def execute(self, requests):
        ready_all = np.array([self._is(r, "CONTROL_SEQUENCE_READY") for r in requests], dtype=np.int32)
        for request in requests:
            gate = json.loads(request.parameters() or "{}").get("gate")
            if gate:
                open(gate + ".entered", "w").close()
                deadline = time.monotonic() + 60
                while not os.path.exists(gate) and time.monotonic() < deadline:
                    time.sleep(0.01)
        responses = []
        for slot, request in enumerate(requests):
            start, end, ready, corrid = (_get(request, n) for n in ("START", "END", "READY", "CORRID"))
            value = int(_get(request, "INPUT").reshape(-1)[0])
            key = corrid.reshape(-1)[0] if self.by_corrid else slot
            if ready_all[slot]:
                if self._is(request, "CONTROL_SEQUENCE_START"):
                    self.sums[key] = 0
                self.sums[key] = self.sums.get(key, 0) + value
            outputs = [
                pb_utils.Tensor("SUM", np.array([[self.sums.get(key, 0)]], dtype=np.int32)),
                pb_utils.Tensor("OUT_START", start.reshape(1, 1)),
                pb_utils.Tensor("OUT_END", end.reshape(1, 1)),
                pb_utils.Tensor("OUT_READY", ready.reshape(1, 1)),
                pb_utils.Tensor("OUT_CORRID", corrid.reshape(1, 1)),
                pb_utils.Tensor("BATCH_READY", ready_all.reshape(1, -1)),
                pb_utils.Tensor("PID", np.array([[os.getpid()]], dtype=np.int64)),
            ]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
