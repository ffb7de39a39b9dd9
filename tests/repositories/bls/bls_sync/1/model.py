"""BLS with exec(): forwards its inputs (and its other parameters) to the model the "target" parameter names and
answers with its outputs (or with its error, prefixed by the code). With the parameter "pid_file" it first writes its
process id there."""

import json
import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            parameters = json.loads(request.parameters())
            target = parameters.pop("target", "add_sub")
            if "pid_file" in parameters:
                with open(parameters.pop("pid_file"), "w") as file:
                    file.write(str(os.getpid()))
            bls = pb_utils.InferenceRequest(
                model_name=target,
                inputs=[request.get_input_tensor_by_name("INPUT0"), request.get_input_tensor_by_name("INPUT1")],
                requested_output_names=["OUTPUT0", "OUTPUT1"], parameters=parameters)
            answer = bls.exec()
            if answer.has_error():
                error = answer.error()
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"[code {error.code()}] {error.message()}")))
                continue
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", pb_utils.get_output_tensor_by_name(answer, "OUTPUT0").as_numpy()),
                pb_utils.Tensor("OUTPUT1", pb_utils.get_output_tensor_by_name(answer, "OUTPUT1").as_numpy()),
            ]))
        return responses
