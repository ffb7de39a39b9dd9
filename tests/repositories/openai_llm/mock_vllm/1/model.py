"""A stand-in for an LLM served by Triton's vLLM backend, in that backend's tensor convention.

Its "generation": the prompt's words (split at white space) in reverse order, one word a token, at most
`max_tokens` of them (from the JSON of `sampling_parameters`). `stream` true: one response per token, the first
token bare and each later one with a leading space, the last sent with the final flag; else one response holding the
whole text, sent with the final flag. `exclude_input_in_output` false (the OpenAI `echo`): the text begins with the
prompt. `return_num_input_tokens` / `return_num_output_tokens` true: each response also holds the prompt's word count
and the count of tokens in that response (UINT32), as the vLLM backend's do; the other `return_*` inputs are taken
and ignored (no finish reason or log probabilities). A `sampling_parameters` that is not a JSON object, or a
`max_tokens` below 1 (vLLM's own bound), is answered with an error response saying so.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _scalar(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else tensor.as_numpy().reshape(-1)[0]


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _count(name, value):
    return pb_utils.Tensor(name, np.array([value], dtype=np.uint32))


def _answer(text, tokens, counts):
    """A response holding `text`, made of `tokens` tokens; `counts`: (prompt tokens or None, whether to count
    the output's)."""
    outputs = [pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_))]
    prompt_tokens, count_output = counts
    if prompt_tokens is not None:
        outputs.append(_count("num_input_tokens", prompt_tokens))
    if count_output:
        outputs.append(_count("num_output_tokens", tokens))
    return pb_utils.InferenceResponse(outputs)


def _max_tokens(sampling_parameters):
    """The `max_tokens` of the JSON object `sampling_parameters` (None: no bound); ValueError saying what is wrong."""
    try:
        parameters = json.loads(sampling_parameters)
    except ValueError as exc:
        raise ValueError(f"sampling_parameters is not JSON: {exc}") from None
    if not isinstance(parameters, dict):
        raise ValueError(f"sampling_parameters is not a JSON object: {sampling_parameters}")
    max_tokens = parameters.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    return max_tokens


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            prompt = _text(_scalar(request, "text_input", b""))
            stream = bool(_scalar(request, "stream", False))
            exclude_input = bool(_scalar(request, "exclude_input_in_output", True))
            try:
                max_tokens = _max_tokens(_text(_scalar(request, "sampling_parameters", b"{}")))
            except ValueError as exc:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"mock_vllm: {exc}")), flags=FINAL)
                continue
            words = prompt.split()
            tokens = words[::-1][:max_tokens]
            counts = (len(words) if _scalar(request, "return_num_input_tokens", False) else None,
                      bool(_scalar(request, "return_num_output_tokens", False)))
            if not stream:
                text = ("" if exclude_input else prompt) + " ".join(tokens)
                sender.send(_answer(text, len(tokens), counts), flags=FINAL)
                continue
            if not tokens:
                sender.send(flags=FINAL)
            for index, token in enumerate(tokens):
                piece = token if index == 0 else " " + token
                sender.send(_answer(piece, 1, counts), flags=FINAL if index == len(tokens) - 1 else 0)
        return None
