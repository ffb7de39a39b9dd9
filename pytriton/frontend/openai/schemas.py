"""The OpenAI requests the port takes, read from their JSON into plain dataclasses and checked field by field.

Only what the port acts on is read; every other field of a completion or chat request that the model may use
(temperature, top_p, seed, penalties, ...) is kept in `sampling` and handed to the model (conventions.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from pytriton.frontend.openai.errors import invalid

# Fields of a completion or chat request that are not sampling settings (the model is not given them as such).
NOT_SAMPLING = frozenset({
    "model", "stream", "messages", "prompt", "echo", "store", "metadata", "response_format", "service_tier",
    "stream_options", "tools", "tool_choice", "parallel_tool_calls", "user", "function_call", "functions", "suffix",
    "n", "best_of", "logprobs", "top_logprobs", "logit_bias", "max_completion_tokens",
})


@dataclasses.dataclass
class TextRequest:
    """A completion (`prompt`) or chat completion (`messages`) request."""

    model: str
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage
    prompt: str = ""
    messages: list[dict[str, str]] = dataclasses.field(default_factory=list)
    echo: bool | None = None
    max_tokens: int | None = None
    stop: list[str] = dataclasses.field(default_factory=list)
    sampling: dict[str, Any] = dataclasses.field(default_factory=dict)  # stop and max_tokens included


@dataclasses.dataclass
class EmbeddingRequest:
    model: str
    inputs: list[str]
    base64: bool = False  # encoding_format "base64" (the openai client's default), else "float"
    dimensions: int | None = None


def parse_json(body: bytes | bytearray) -> dict[str, Any]:
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"We could not parse the JSON body of your request: {exc.msg} at {exc.pos}.") from None
    if not isinstance(obj, dict):
        raise invalid("The JSON body of your request must be an object.")
    return obj


def _model(obj: dict[str, Any]) -> str:
    model = obj.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("you must provide a model parameter", "model")
    return model


def _bool(obj: dict[str, Any], key: str) -> bool | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, bool):
        raise invalid(f"'{key}' must be a boolean, got {type(value).__name__}", key)
    return value


def _positive_int(obj: dict[str, Any], key: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise invalid(f"'{key}' must be a positive integer, got {value!r}", key)
    return value


def _one_choice(obj: dict[str, Any]) -> None:
    for key in ("n", "best_of"):
        value = obj.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise invalid(f"'{key}' must be a positive integer, got {value!r}", key)
        if value > 1:
            raise invalid(f"Received {key}={value}, but only a single choice ({key}=1) is supported", key)
    if obj.get("logit_bias") is not None or obj.get("logprobs") not in (None, False):
        raise invalid("logit_bias and logprobs are not supported", "logprobs")
    if obj.get("suffix") is not None:
        raise invalid("suffix is not supported", "suffix")
    tools = obj.get("tools")
    if tools:
        raise invalid("tools are not supported", "tools")


def _stop(obj: dict[str, Any]) -> list[str]:
    stop = obj.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop] if stop else []
    if isinstance(stop, list) and len(stop) <= 4 and all(isinstance(s, str) for s in stop):
        return [s for s in stop if s]
    raise invalid("'stop' must be a string or a list of at most 4 strings", "stop")


def _text_request(obj: dict[str, Any]) -> TextRequest:
    _one_choice(obj)
    request = TextRequest(_model(obj), stream=bool(_bool(obj, "stream")), echo=_bool(obj, "echo"), stop=_stop(obj))
    options = obj.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise invalid("'stream_options' must be an object", "stream_options")
        if not request.stream:
            raise invalid("'stream_options' is only allowed when 'stream' is true", "stream_options")
        request.include_usage = bool(options.get("include_usage"))
    limit = _positive_int(obj, "max_completion_tokens")
    request.max_tokens = limit if limit is not None else _positive_int(obj, "max_tokens")
    for key, value in obj.items():
        if key not in NOT_SAMPLING and value is not None:
            request.sampling[key] = value
    if request.max_tokens is not None:
        request.sampling["max_tokens"] = request.max_tokens
    if request.stop:
        request.sampling["stop"] = request.stop
    return request


def completion_request(obj: dict[str, Any]) -> TextRequest:
    """A `/v1/completions` body (one prompt, a string)."""
    prompt = obj.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise invalid("'prompt' must be one string (token ids and several prompts are not supported)", "prompt")
    if not prompt:
        raise invalid("'prompt' must not be empty", "prompt")
    request = _text_request(obj)
    request.prompt = prompt
    return request


def _content(index: int, content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # parts: only text parts are understood
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise invalid(f"messages[{index}].content: only text parts are supported", f"messages[{index}]")
            texts.append(part["text"])
        return "".join(texts)
    raise invalid(f"messages[{index}].content must be a string or a list of text parts", f"messages[{index}]")


def chat_request(obj: dict[str, Any]) -> TextRequest:
    """A `/v1/chat/completions` body."""
    messages = obj.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("'messages' must be a non-empty list", "messages")
    conversation = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise invalid(f"messages[{index}] must be an object with a 'role'", f"messages[{index}]")
        conversation.append({"role": message["role"], "content": _content(index, message.get("content"))})
    request = _text_request(obj)
    request.messages = conversation
    return request


def embedding_request(obj: dict[str, Any]) -> EmbeddingRequest:
    """A `/v1/embeddings` body (one string or a list of strings)."""
    given = obj.get("input")
    inputs = [given] if isinstance(given, str) else given
    if not isinstance(inputs, list) or not inputs or not all(isinstance(s, str) and s for s in inputs):
        raise invalid("'input' must be a non-empty string or a list of non-empty strings (token ids are not "
                      "supported)", "input")
    encoding = obj.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise invalid("'encoding_format' must be 'float' or 'base64'", "encoding_format")
    return EmbeddingRequest(_model(obj), inputs, encoding == "base64", _positive_int(obj, "dimensions"))


__all__ = ["NOT_SAMPLING", "EmbeddingRequest", "TextRequest", "chat_request", "completion_request",
           "embedding_request", "parse_json"]
