"""Decoupled: streams each element of IN as its own response, then the final flag (from a thread, as Triton's
decoupled examples do)."""

import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        if not pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"])):
            raise pb_utils.TritonModelException("repeat_int must be configured as decoupled")
        self.threads = []

    def execute(self, requests):
        for request in requests:
            values = request.get_input_tensor_by_name("IN").as_numpy().copy()
            sender = request.get_response_sender()
            thread = threading.Thread(target=self.send, args=(sender, values))
            thread.start()
            self.threads.append(thread)
        return None

    @staticmethod
    def send(sender, values):
        for value in values:
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join()
