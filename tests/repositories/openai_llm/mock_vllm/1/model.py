"""A stand-in for an LLM, in the tensor convention of Triton's vLLM backend (`sampling_parameters` as JSON,
`exclude_input_in_output`) or of TensorRT-LLM's (`max_tokens`, `stop_words`... each a tensor, with a batch
dimension): its configuration says which (mock_vllm; mock_trtllm links this file).

Its "generation": the prompt's words (split at white space) in reverse order, one word a token, cut before the first
of the `stop` words, at most `max_tokens` of them. `stream` true: one response per token, the first token bare and
each later one with a leading space, the last sent with the final flag (no token: the final flag alone); else one
response holding the whole text, sent with the final flag. `exclude_input_in_output` false (the OpenAI `echo`): the
text begins with the prompt. `return_num_input_tokens` / `return_num_output_tokens` true: each response also holds
the prompt's word count and the count of tokens in that response, of the type the configuration gives; other inputs
(sampling: temperature, seed...) are taken and ignored. A `sampling_parameters` that is not a JSON object, or a
`max_tokens` below 1 (vLLM's own bound), is answered with an error response saying so.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _values(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy().reshape(-1)


def _scalar(request, name, default):
    values = _values(request, name)
    return default if values is None else values[0]


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _sampling(request):
    """(max_tokens or None, stop words) from `sampling_parameters` (vLLM) or from tensors (TensorRT-LLM);
    ValueError saying what is wrong."""
    if _values(request, "sampling_parameters") is None:
        max_tokens = _scalar(request, "max_tokens", None)
        max_tokens = None if max_tokens is None else int(max_tokens)
        words = _values(request, "stop_words")
        stop = [] if words is None else [_text(word) for word in words]
    else:
        text = _text(_scalar(request, "sampling_parameters", b"{}"))
        try:
            parameters = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"sampling_parameters is not JSON: {exc}") from None
        if not isinstance(parameters, dict):
            raise ValueError(f"sampling_parameters is not a JSON object: {text}")
        max_tokens = parameters.get("max_tokens")
        stop = parameters.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    return max_tokens, stop


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]
        config = json.loads(args["model_config"])
        self.batched = config["max_batch_size"] > 0
        counts = pb_utils.get_output_config_by_name(config, "num_input_tokens")
        self.count_type = pb_utils.triton_string_to_numpy(counts["data_type"]) if counts else np.uint32

    def _tensor(self, name, values, dtype):
        array = np.array(values, dtype=dtype)
        return pb_utils.Tensor(name, array.reshape((1, -1)) if self.batched else array)

    def _answer(self, text, tokens, counts):
        """A response holding `text`, made of `tokens` tokens; `counts`: (prompt tokens or None, whether to count
        the output's)."""
        outputs = [self._tensor("text_output", [text.encode("utf-8")], np.object_)]
        prompt_tokens, count_output = counts
        if prompt_tokens is not None:
            outputs.append(self._tensor("num_input_tokens", [prompt_tokens], self.count_type))
        if count_output:
            outputs.append(self._tensor("num_output_tokens", [tokens], self.count_type))
        return pb_utils.InferenceResponse(outputs)

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            prompt = _text(_scalar(request, "text_input", b""))
            stream = bool(_scalar(request, "stream", False))
            exclude_input = bool(_scalar(request, "exclude_input_in_output", True))
            try:
                max_tokens, stop = _sampling(request)
            except ValueError as exc:
                error = pb_utils.TritonError(f"{self.name}: {exc}")
                sender.send(pb_utils.InferenceResponse(error=error), flags=FINAL)
                continue
            words = prompt.split()
            tokens = words[::-1]
            for index, token in enumerate(tokens):
                if token in stop:
                    tokens = tokens[:index]
                    break
            tokens = tokens[:max_tokens]
            counts = (len(words) if _scalar(request, "return_num_input_tokens", False) else None,
                      bool(_scalar(request, "return_num_output_tokens", False)))
            if not stream:
                text = ("" if exclude_input else prompt) + " ".join(tokens)
                sender.send(self._answer(text, len(tokens), counts), flags=FINAL)
                continue
            if not tokens:
                sender.send(flags=FINAL)
            for index, token in enumerate(tokens):
                piece = token if index == 0 else " " + token
                sender.send(self._answer(piece, 1, counts), flags=FINAL if index == len(tokens) - 1 else 0)
        return None
