import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Each request counts down from IN, one step per execution, rescheduled (TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
    until the count reaches 0. Decoupled, every step sends a response (the last one final); otherwise only the last
    step answers (a rescheduled request's entry is None). Every response tells the execution number (of the
    instance), the correlation id and the flags the model saw, and how many requests the execution held."""

    def initialize(self, args):
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"]))
        self.executions = 0
        self.remaining = {}

    def execute(self, requests):
        self.executions += 1
        responses = []
        for request in requests:
            key = request.correlation_id()
            given = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            shape = given.shape
            if key not in self.remaining:
                self.remaining[key] = int(given.reshape(-1)[0])
            self.remaining[key] -= 1
            left = self.remaining[key]
            response = pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", np.array([left], np.int32).reshape(shape)),
                pb_utils.Tensor("EXEC", np.array([self.executions], np.int32).reshape(shape)),
                pb_utils.Tensor("CORRID", np.array([key], np.uint64).reshape(shape)),
                pb_utils.Tensor("FLAGS", np.array([request.flags()], np.int32).reshape(shape)),
                pb_utils.Tensor("BATCH", np.array([len(requests)], np.int32).reshape(shape)),
            ])
            if left <= 0:
                del self.remaining[key]
            else:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
            if not self.decoupled:
                responses.append(response if left <= 0 else None)
            elif left <= 0:
                request.get_response_sender().send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                request.get_response_sender().send(response)
        return responses if not self.decoupled else None
