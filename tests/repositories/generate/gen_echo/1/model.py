import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            params = json.loads(request.parameters())
            if params.get("fail"):
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("gen_echo was asked to fail")))
                continue
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            scale = pb_utils.get_input_tensor_by_name(request, "scale")
            scale = np.zeros((2, 0), dtype=np.float32) if scale is None else scale.as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("text_output", np.array([b"echo: " + text], dtype=np.object_)),
                pb_utils.Tensor("params", np.array([json.dumps(params, sort_keys=True).encode()], dtype=np.object_)),
                pb_utils.Tensor("scaled", (scale * 2).astype(np.float32)),
                pb_utils.Tensor("shape", np.array(scale.shape, dtype=np.int64)),
            ]))
        return responses
