"""`@text_generator`: a function that yields the pieces of a text becomes a model the OpenAI port (and Triton's
generate extension, and gRPC streams) serve as an LLM, with vLLM's tensor convention:

    @text_generator
    def tiny(prompt: str, parameters: dict) -> Iterator[str]: ...

Inputs `text_input` (the prompt), `sampling_parameters` (a JSON object: the request's sampling fields, handed to the
function as `parameters`), and the optional `stream`, `exclude_input_in_output`, `return_num_input_tokens`,
`return_num_output_tokens`; outputs `text_output`, `num_output_tokens` (pieces) and, with `prompt_tokens`,
`num_input_tokens` (every response carries them: a request that lists no outputs gets every declared one). The
wrapper applies `max_tokens` (pieces) and `stop` (the text ends before the first stop string) itself, so the function
need not; it is closed (GeneratorExit at its `yield`) when the client leaves.
`pytriton serve module:tiny` reads the declaration; in Python, `Triton().bind("tiny", tiny, **tiny.bind_args)`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import numpy as np

from pytriton.model_config import ModelConfig, Tensor, triton_model

_INPUTS = [
    Tensor(name="text_input", shape=(1,), dtype=bytes),
    Tensor(name="sampling_parameters", shape=(1,), dtype=bytes, optional=True),
    Tensor(name="stream", shape=(1,), dtype=np.bool_, optional=True),
    Tensor(name="exclude_input_in_output", shape=(1,), dtype=np.bool_, optional=True),
    Tensor(name="return_num_input_tokens", shape=(1,), dtype=np.bool_, optional=True),
    Tensor(name="return_num_output_tokens", shape=(1,), dtype=np.bool_, optional=True),
]
_TEXT_OUTPUT = Tensor(name="text_output", shape=(1,), dtype=bytes)
_OUTPUT_TOKENS = Tensor(name="num_output_tokens", shape=(1,), dtype=np.uint32)
_INPUT_TOKENS = Tensor(name="num_input_tokens", shape=(1,), dtype=np.uint32)


def _flag(request: Any, name: str, default: bool) -> bool:
    value = request.get(name) if hasattr(request, "get") else None
    return default if value is None else bool(np.asarray(value).reshape(-1)[0])


def _text(value: Any) -> str:
    item = np.asarray(value).reshape(-1)[0]
    return item.decode("utf-8") if isinstance(item, bytes) else str(item)


class _Generation:
    """One request's generation: its prompt and parameters, and the text let out so far under `max_tokens` and
    `stop` (the end of the text that may begin a stop string is held back until the next piece tells)."""

    def __init__(self, request: Any, prompt_tokens: Callable[[str], int] | None):
        self.prompt = _text(request["text_input"])
        raw = request.get("sampling_parameters")
        parameters = json.loads(_text(raw)) if raw is not None else {}
        if not isinstance(parameters, dict):
            raise ValueError("sampling_parameters must be a JSON object")  # noqa: TRY004 - the client's value
        self.parameters: dict[str, Any] = parameters
        stop = parameters.get("stop") or []
        self.stop = [stop] if isinstance(stop, str) else [s for s in stop if s]
        limit = parameters.get("max_tokens")
        self.max_tokens = int(limit) if limit is not None else None
        self.stream = _flag(request, "stream", True)
        self.echo = not _flag(request, "exclude_input_in_output", True)
        self.input_tokens = prompt_tokens(self.prompt) if prompt_tokens is not None else None
        self.pieces = 0  # taken from the function
        self.unreported = 0  # pieces taken since the last response
        self.held = ""
        self.whole: list[str] = []  # stream false: everything, sent at the end
        self.done = False

    def feed(self, piece: str) -> str:
        """The text `piece` lets out now ("" if none); `done` is set once the text has ended."""
        self.pieces += 1
        self.unreported += 1
        text = self.held + piece
        self.held = ""
        cut = min((i for i in (text.find(s) for s in self.stop) if i >= 0), default=-1)
        if cut >= 0:
            self.done = True
            return text[:cut]
        if self.max_tokens is not None and self.pieces >= self.max_tokens:
            self.done = True
            return text
        keep = max((k for s in self.stop for k in range(min(len(s) - 1, len(text)), 0, -1)
                    if text.endswith(s[:k])), default=0)
        if keep:
            text, self.held = text[:-keep], text[-keep:]
        return text

    def finish(self) -> str:
        text, self.held = self.held, ""
        return text

    def response(self, text: str) -> dict[str, np.ndarray]:
        if self.echo:
            text, self.echo = self.prompt + text, False
        out = {"text_output": np.array([text.encode("utf-8")], dtype=np.object_)}
        if self.input_tokens is not None:
            out["num_input_tokens"] = np.array([self.input_tokens], dtype=np.uint32)
        out["num_output_tokens"] = np.array([self.unreported], dtype=np.uint32)
        self.unreported = 0
        return out

    def step(self, piece: str) -> list[dict[str, np.ndarray]]:
        """The responses to send after `piece` (none or one)."""
        text = self.feed(piece)
        if not self.stream:
            self.whole.append(text)
            return []
        return [self.response(text)] if text or self.done else []

    def last(self) -> list[dict[str, np.ndarray]]:
        """The responses to send once the function has ended (or the text has)."""
        rest = self.finish()
        if not self.stream:
            return [self.response("".join(self.whole) + rest)]
        return [self.response(rest)] if rest or self.unreported else []


def _one(requests: list[Any]) -> Any:
    if len(requests) != 1:
        raise ValueError(f"a text generator takes one request per execution, got {len(requests)}")
    return requests[0]


def text_generator(function: Callable[..., Any] | None = None, *, name: str | None = None,
                   prompt_tokens: Callable[[str], int] | None = None, instances: int | None = None) -> Any:
    """Declare `function(prompt, parameters)`, a generator (or async generator) of text pieces, an LLM model (see
    the module's docstring). `prompt_tokens(prompt)` counts the prompt's tokens for `usage`; `name`: the model's
    name (default: the function's); `instances`: as in `@triton_model`."""

    def declare(function: Callable[..., Any]) -> Any:
        if inspect.isasyncgenfunction(function):
            async def infer_async(requests: list[Any]) -> AsyncIterator[list[dict[str, np.ndarray]]]:
                generation = _Generation(_one(requests), prompt_tokens)
                pieces = function(generation.prompt, generation.parameters)
                try:
                    async for piece in pieces:
                        for response in generation.step(str(piece)):
                            yield [response]
                        if generation.done:
                            break
                    for response in generation.last():
                        yield [response]
                finally:
                    await pieces.aclose()

            infer: Callable[..., Any] = infer_async
        else:
            def infer_sync(requests: list[Any]) -> Iterator[list[dict[str, np.ndarray]]]:
                generation = _Generation(_one(requests), prompt_tokens)
                pieces = function(generation.prompt, generation.parameters)
                try:
                    for piece in pieces:
                        for response in generation.step(str(piece)):
                            yield [response]
                        if generation.done:
                            break
                    for response in generation.last():
                        yield [response]
                finally:
                    close = getattr(pieces, "close", None)
                    if close is not None:
                        close()

            infer = infer_sync
        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(infer, attribute, getattr(function, attribute, None))
        # (type: ignore: an attribute added to a function object, which mypy types without it)
        infer.__wrapped_generator__ = function  # type: ignore[attr-defined]
        outputs = [_TEXT_OUTPUT, _OUTPUT_TOKENS] + ([_INPUT_TOKENS] if prompt_tokens is not None else [])
        config = ModelConfig(batching=False, decoupled=True)
        # `Triton().bind(name, infer, **infer.bind_args)`: the same model bound in Python (type: ignore as above)
        infer.bind_args = {"inputs": _INPUTS, "outputs": outputs, "config": config}  # type: ignore[attr-defined]
        return triton_model(inputs=_INPUTS, outputs=outputs, config=config, name=name or function.__name__,
                            instances=instances)(infer)

    return declare if function is None else declare(function)


__all__ = ["text_generator"]
