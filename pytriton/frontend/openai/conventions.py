"""The tensor conventions an LLM served here follows, as Triton's OpenAI frontend sends them, so one repository serves
both; which one a model follows is read from its inputs:

- vLLM's (a model with a `sampling_parameters` input): `text_input` (the prompt), `stream`, `exclude_input_in_output`
  (not `echo`), `sampling_parameters` (the request's sampling fields, `stop` and `max_tokens` included, as one JSON
  string), `return_num_input_tokens`/`return_num_output_tokens` where declared; answers `text_output`.
- TensorRT-LLM's (a `text_input` input without `sampling_parameters`): `text_input`, `stream`, `max_tokens` (16 when
  not given, as Triton's), `stop_words`, `temperature`, `top_p`, `frequency_penalty`, `presence_penalty`, `seed` or
  `random_seed`, `exclude_input_in_output` and the two `return_num_*` flags, each only where the model declares it;
  answers `text_output`.
- embeddings: vLLM's (`embedding_request`, a JSON string, answered with a JSON list in `text_output`) or a plain
  one (`text_input` in, an `embedding` output of numbers).

A response's `num_input_tokens` and `num_output_tokens` outputs (any integer type), where the model sends them, give
the answer's `usage` (input: the last seen; output: summed over the stream's responses).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import orjson

from pytriton.core.types import InferRequest, InferResponse, Tensor
from pytriton.exceptions import ServerError
from pytriton.frontend.http.generate import input_tensor
from pytriton.frontend.openai.errors import invalid
from pytriton.frontend.openai.schemas import EmbeddingRequest, TextRequest
from pytriton.model_config.datatypes import deserialize_bytes_tensor

VLLM = "vllm"
TRTLLM = "tensorrt_llm"
VLLM_EMBEDDING = "vllm_embedding"
EMBEDDING = "embedding"
DEFAULT_MAX_TOKENS = 16  # what Triton's frontend asks a TensorRT-LLM model for when the request gives no limit

# TensorRT-LLM's inputs for the request's sampling fields, with their datatypes' numpy types.
_TRTLLM_FIELDS = (("temperature", "temperature"), ("top_p", "top_p"), ("frequency_penalty", "frequency_penalty"),
                  ("presence_penalty", "presence_penalty"), ("seed", "seed"), ("seed", "random_seed"))


@dataclasses.dataclass(frozen=True)
class ModelInterface:
    """What the OpenAI port needs to know of a served model: its convention, inputs (datatype, metadata dims) by name,
    outputs by name, and whether it streams (decoupled)."""

    name: str
    kind: str | None  # VLLM, TRTLLM, VLLM_EMBEDDING, EMBEDDING; None: none of them
    inputs: dict[str, tuple[str, list[int]]]
    outputs: dict[str, str]
    decoupled: bool

    @classmethod
    def of(cls, metadata: dict[str, Any], decoupled: bool) -> ModelInterface:
        inputs = {i["name"]: (i["datatype"], list(i["shape"])) for i in metadata.get("inputs", [])}
        outputs = {o["name"]: o["datatype"] for o in metadata.get("outputs", [])}
        kind: str | None = None
        if "embedding_request" in inputs:
            kind = VLLM_EMBEDDING
        elif "text_input" in inputs and "embedding" in outputs:
            kind = EMBEDDING
        elif "text_input" in inputs and "sampling_parameters" in inputs:
            kind = VLLM
        elif "text_input" in inputs and "text_output" in outputs:
            kind = TRTLLM
        return cls(metadata["name"], kind, inputs, outputs, decoupled)

    @property
    def generates_text(self) -> bool:
        return self.kind in (VLLM, TRTLLM)

    @property
    def embeds(self) -> bool:
        return self.kind in (VLLM_EMBEDDING, EMBEDDING)

    def _add(self, request: InferRequest, name: str, value: Any) -> None:
        datatype, dims = self.inputs[name]
        try:
            request.inputs.append(input_tensor(name, datatype, dims, value))
        except ServerError as exc:
            raise invalid(f"model '{self.name}' cannot take its input '{name}' ({datatype} {dims}) as the OpenAI "
                          f"convention gives it: {exc.message}") from None

    def _flags(self, request: InferRequest, text: TextRequest) -> None:
        if "stream" in self.inputs:
            self._add(request, "stream", text.stream)
        if text.echo is not None or self.kind == VLLM:
            if "exclude_input_in_output" in self.inputs:
                self._add(request, "exclude_input_in_output", not text.echo)
        for name in ("return_num_input_tokens", "return_num_output_tokens"):
            if name in self.inputs:
                self._add(request, name, True)

    def text_request(self, prompt: str, text: TextRequest) -> InferRequest:
        """The inference request of a completion of `prompt`."""
        request = InferRequest(self.name, "")
        self._add(request, "text_input", prompt)
        self._flags(request, text)
        if self.kind == VLLM:
            self._add(request, "sampling_parameters", orjson.dumps(text.sampling).decode())
            return request
        if "max_tokens" in self.inputs:
            self._add(request, "max_tokens", text.max_tokens if text.max_tokens is not None else DEFAULT_MAX_TOKENS)
        if text.stop and "stop_words" in self.inputs:
            self._add(request, "stop_words", text.stop)
        for field, name in _TRTLLM_FIELDS:
            value = text.sampling.get(field)
            if value is not None and name in self.inputs:
                self._add(request, name, value)
        return request

    def embedding_requests(self, embedding: EmbeddingRequest) -> list[InferRequest]:
        """One inference request per input string."""
        requests = []
        for text in embedding.inputs:
            request = InferRequest(self.name, "")
            if self.kind == VLLM_EMBEDDING:
                pooling = {"dimensions": [embedding.dimensions]} if embedding.dimensions is not None else {}
                self._add(request, "embedding_request",
                          orjson.dumps({"input": text, "pooling_params": pooling}).decode())
            else:
                self._add(request, "text_input", text)
            for name in ("return_num_input_tokens", "return_num_output_tokens"):
                if name in self.inputs:
                    self._add(request, name, True)
            requests.append(request)
        return requests


def _output(response: InferResponse, name: str) -> Tensor | None:
    for tensor in response.outputs:
        if tensor.name == name:
            return tensor
    return None


def text_bytes(response: InferResponse) -> bytes:
    """The bytes of a response's `text_output` (b"" without one); several elements are joined."""
    tensor = _output(response, "text_output")
    if tensor is None or tensor.data is None:
        return b""
    data = tensor.data
    if len(tensor.shape) <= 2 and all(d == 1 for d in tensor.shape):  # one string: its 4-byte length, then it
        return bytes(memoryview(data)[4:])
    return b"".join(deserialize_bytes_tensor(data, tensor.shape).reshape(-1))


def token_counts(response: InferResponse) -> tuple[int | None, int | None]:
    """The response's `num_input_tokens` and `num_output_tokens`, where it sends them."""
    counts: list[int | None] = []
    for name in ("num_input_tokens", "num_output_tokens"):
        tensor = _output(response, name)
        value: int | None = None
        if tensor is not None and tensor.data is not None and tensor.datatype[:3] in ("INT", "UIN"):
            array = np.frombuffer(tensor.data, dtype=_INTEGER[tensor.datatype])
            value = int(array[0]) if array.size else None
        counts.append(value)
    return counts[0], counts[1]


_INTEGER = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "UINT8": np.uint8,
            "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64}


def embedding_values(kind: str, response: InferResponse) -> np.ndarray:
    """The embedding a response carries, as float32."""
    if kind == VLLM_EMBEDDING:
        try:
            values = orjson.loads(text_bytes(response))
        except orjson.JSONDecodeError:
            values = None
        if isinstance(values, list) and values and isinstance(values[0], list):
            values = values[0]
        if not isinstance(values, list):
            raise invalid(f"model '{response.model_name}' answered no embedding (text_output is not a JSON list)")
        return np.asarray(values, dtype=np.float32)
    tensor = _output(response, "embedding")
    if tensor is None or tensor.data is None or tensor.datatype not in ("FP16", "FP32", "FP64", "BF16"):
        raise invalid(f"model '{response.model_name}' answered no embedding (an 'embedding' output of numbers)")
    if tensor.datatype == "BF16":
        raw = np.frombuffer(tensor.data, dtype=np.uint16).astype(np.uint32) << 16
        return raw.view(np.float32)
    return np.frombuffer(tensor.data, dtype={"FP16": np.float16, "FP32": np.float32, "FP64": np.float64}[
        tensor.datatype]).astype(np.float32)


__all__ = ["DEFAULT_MAX_TOKENS", "EMBEDDING", "TRTLLM", "VLLM", "VLLM_EMBEDDING", "ModelInterface",
           "embedding_values", "text_bytes", "token_counts"]
