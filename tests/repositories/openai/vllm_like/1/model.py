import json

import numpy as np
import triton_python_backend_utils as pb_utils


def _input(request, name, default=None):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else tensor.as_numpy().reshape(-1)[0]


def _response(text, prompt_tokens, output_tokens):
    return pb_utils.InferenceResponse([
        pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_)),
        pb_utils.Tensor("num_input_tokens", np.array([prompt_tokens], dtype=np.uint32)),
        pb_utils.Tensor("num_output_tokens", np.array([output_tokens], dtype=np.uint32)),
    ])


class TritonPythonModel:
    """vLLM's convention: the first piece is the sampling parameters it got and its flags, then the prompt's words."""

    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for request in requests:
            sender = request.get_response_sender()
            prompt = _input(request, "text_input").decode()
            parameters = json.loads(_input(request, "sampling_parameters", b"{}").decode())
            flags = {"stream": bool(_input(request, "stream", True)),
                     "exclude_input_in_output": bool(_input(request, "exclude_input_in_output", True))}
            words = [w + " " for w in prompt.split()]
            pieces = [json.dumps({"sampling": parameters, **flags}, sort_keys=True) + "|", *words]
            if not flags["stream"]:
                pieces = ["".join(pieces)]
            for piece in pieces:
                sender.send(_response(piece, len(prompt.split()), 1))
            sender.send(flags=final)
        return None
