"""Decoupled: sends IN, then waits (inside execute) for the file the request parameter "gate" names, then sends IN + 1
and the final flag. With the parameter "thread" true, another thread sends them while execute waits for it. A client
that sees the first response only once execute returns never creates the file: the model then answers an error."""

import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

GATE_WAIT_S = 30


def _answer(request):
    sender = request.get_response_sender()
    value = int(request.get_input_tensor_by_name("IN").as_numpy()[0])
    gate = json.loads(request.parameters())["gate"]
    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))]))
    deadline = time.monotonic() + GATE_WAIT_S
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("the gate never opened")),
                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        time.sleep(0.01)
    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value + 1], dtype=np.int32))]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            if json.loads(request.parameters()).get("thread"):
                thread = threading.Thread(target=_answer, args=(request,))
                thread.start()
                thread.join()
            else:
                _answer(request)
        return None
