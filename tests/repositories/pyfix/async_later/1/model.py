"""Decoupled, with `async def execute`: sends IN and returns at once, leaving a task on its event loop that waits for
the file the request parameter "gate" names, then sends IN + 1 and the final flag (as Triton's response_sender QA
models answer after execute returned). The task only runs if the model's event loop goes on running once execute
returned; if the gate never opens, it answers an error."""

import asyncio
import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils

GATE_WAIT_S = 30


def _out(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))])


async def _later(sender, value, gate):
    deadline = time.monotonic() + GATE_WAIT_S
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("the gate never opened")),
                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        await asyncio.sleep(0.01)
    sender.send(_out(value + 1), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)


class TritonPythonModel:
    def initialize(self, args):
        self.tasks = set()  # (the loop keeps only weak references to its tasks)

    async def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            value = int(request.get_input_tensor_by_name("IN").as_numpy()[0])
            sender.send(_out(value))
            gate = json.loads(request.parameters())["gate"]
            task = asyncio.get_running_loop().create_task(_later(sender, value, gate))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return None
