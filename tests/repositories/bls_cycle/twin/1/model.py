"""A relay for call-chain tests: with the request parameter "route" (model names, comma-separated) empty it answers
Y = X + 1; else it sends X to the first model of the route (with the rest of the route) by BLS and answers that model's
Y + 1, or an error response "<model>: <its error>". With "started" (a path) it first creates that file, with "gate"
(a path) it then waits for that file before its BLS request (both are not passed on)."""

import json
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]

    def execute(self, requests):
        return [self._one(request) for request in requests]

    def _one(self, request):
        x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
        parameters = json.loads(request.parameters())
        started, gate = parameters.pop("started", ""), parameters.pop("gate", "")
        if started:
            open(started, "w").close()
        route = [hop for hop in parameters.pop("route", "").split(",") if hop]
        if not route:
            return pb_utils.InferenceResponse([pb_utils.Tensor("Y", x + 1)])
        while gate and not os.path.exists(gate):
            time.sleep(0.01)
        answer = pb_utils.InferenceRequest(
            model_name=route[0], inputs=[pb_utils.Tensor("X", x)], requested_output_names=["Y"],
            parameters={**parameters, "route": ",".join(route[1:])}).exec()
        if answer.has_error():
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(f"{route[0]}: {answer.error().message()}"))
        return pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_output_tensor_by_name(answer, "Y")
                                                           .as_numpy() + 1)])
