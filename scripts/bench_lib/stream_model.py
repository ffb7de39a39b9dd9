"""The streaming benchmark's model (streaming.py): a Triton Python-backend `model.py`, decoupled, in the tensor
convention of Triton's vLLM backend (`text_input`, `stream`, `sampling_parameters` -> `text_output`), so that both
OpenAI frontends (pytriton's `--openai-port` and Triton's `--backend vllm`) ask it the same way.

Its "generation" costs nothing, so that the benchmark measures the serving path: `max_tokens` pieces (from
`sampling_parameters`; 16 when absent, as the frontends' default) of a few characters each (" t0", " t1"...), one
response per piece when `stream` is true, the last with the final flag; else one response with the whole text. No
sleep, no computation.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _scalar(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else tensor.as_numpy().reshape(-1)[0]


def _answer(text):
    return pb_utils.InferenceResponse([pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_))])


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            raw = _scalar(request, "sampling_parameters", b"{}")
            try:
                parameters = json.loads(raw.decode() if isinstance(raw, bytes) else str(raw))
                count = int(parameters.get("max_tokens") or 16)
            except (ValueError, AttributeError) as exc:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                    f"stream_llm: sampling_parameters: {exc}")), flags=FINAL)
                continue
            pieces = [f" t{i}" for i in range(count)]
            if not bool(_scalar(request, "stream", False)):
                sender.send(_answer("".join(pieces)), flags=FINAL)
                continue
            for i, piece in enumerate(pieces):
                sender.send(_answer(piece), flags=FINAL if i == count - 1 else 0)
        return None
