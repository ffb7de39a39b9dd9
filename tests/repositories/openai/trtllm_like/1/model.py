import json

import numpy as np
import triton_python_backend_utils as pb_utils


def _value(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    values = [v.decode() if isinstance(v, bytes) else v.item() for v in tensor.as_numpy().reshape(-1)]
    return values if name == "stop_words" else values[0]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            got = {name: _value(request, name) for name in
                   ("text_input", "max_tokens", "stop_words", "temperature", "top_p", "seed", "stream")}
            if got["temperature"] is not None:
                got["temperature"] = round(got["temperature"], 3)
            text = json.dumps({k: v for k, v in got.items() if v is not None}, sort_keys=True)
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("text_output", np.array([[text.encode()]], dtype=np.object_))]))
        return responses
