"""Decoupled with dynamic batching: each request of a batch is answered from a thread of its own, so the responses of
the batch's requests interleave. Request i sends COUNT responses (VALUE 0, 1, ..., its TAG, the BATCH size it ran in
and its INDEX in the batch), then the final flag. The request parameter `mode` changes that for one request:
"fail" sends one response, then an error response with the final flag; "until_cancelled" sends responses until its
client has left (writing "cancelled" into the file `marker`), then the final flag; "hold" sends its responses only once
the file `release` exists."""

import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _int(value):
    return np.array([[value]], dtype=np.int32)


class TritonPythonModel:
    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for index, request in enumerate(requests):
            thread = threading.Thread(target=self.answer, args=(request, index, len(requests)))
            thread.start()
            self.threads.append(thread)
        self.threads = [t for t in self.threads if t.is_alive()]
        return None

    @staticmethod
    def answer(request, index, batch):
        sender = request.get_response_sender()
        count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy().reshape(-1)[0])
        tag = int(pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy().reshape(-1)[0])
        params = json.loads(request.parameters())
        mode = params.get("mode", "")

        def response(value):
            return pb_utils.InferenceResponse([
                pb_utils.Tensor("VALUE", _int(value)), pb_utils.Tensor("TAG", _int(tag)),
                pb_utils.Tensor("BATCH", _int(batch)), pb_utils.Tensor("INDEX", _int(index))])

        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        if mode == "fail":
            sender.send(response(0))
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"request {tag} failed")), flags=final)
            return
        if mode == "until_cancelled":
            deadline = time.monotonic() + 30
            value = 0
            while not sender.is_cancelled() and time.monotonic() < deadline:
                sender.send(response(value))
                value += 1
                time.sleep(0.01)
            if sender.is_cancelled():
                with open(params["marker"], "w") as f:
                    f.write("cancelled")
            sender.send(flags=final)
            return
        if mode == "hold":
            deadline = time.monotonic() + 30
            while not os.path.exists(params["release"]) and time.monotonic() < deadline:
                time.sleep(0.01)
        for value in range(count):
            sender.send(response(value))
        sender.send(flags=final)

    def finalize(self):
        for thread in self.threads:
            thread.join()
