import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.calls = 0

    def execute(self, requests):
        self.calls += 1
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            outputs = [pb_utils.Tensor("Y", x * 2), pb_utils.Tensor("CALLS", np.array([self.calls], dtype=np.int64)),
                       pb_utils.Tensor("TEXT", np.array([b"seen"], dtype=np.object_))]
            wanted = request.requested_output_names()
            responses.append(pb_utils.InferenceResponse([t for t in outputs if not wanted or t.name() in wanted],
                                                        parameters={"calls": self.calls, "kind": "computed"}))
        return responses
