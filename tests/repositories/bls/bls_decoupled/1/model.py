"""BLS to a decoupled model: iterates over repeat_int's responses (exec(decoupled=True)); answers with their sum and
their count, the final (empty) response included; fails unless only the last one is empty."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            bls = pb_utils.InferenceRequest(model_name="repeat_int", inputs=[request.get_input_tensor_by_name("IN")],
                                            requested_output_names=["OUT"])
            total = count = 0
            finals = []
            for answer in bls.exec(decoupled=True):
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
                count += 1
                finals.append(not answer.output_tensors())
                out = pb_utils.get_output_tensor_by_name(answer, "OUT")
                if out is not None:
                    total += int(out.as_numpy().sum())
            if finals != [False] * (count - 1) + [True]:
                raise pb_utils.TritonModelException(f"empty responses: {finals}")
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SUM", np.array([total], dtype=np.int32)),
                pb_utils.Tensor("COUNT", np.array([count], dtype=np.int32))]))
        return responses
