"""The OpenAI-compatible routes, on a port of their own (`--openai-port`):

- `GET /v1/models`, `GET /v1/models/<id>`: the ready models, as OpenAI lists them.
- `POST /v1/completions`, `POST /v1/chat/completions`: text generation by a model that follows vLLM's or
  TensorRT-LLM's tensor convention (conventions.py); the chat's messages become the prompt through the chat template
  (chat_template.py). `stream: true` answers server-sent events, one chunk per piece the model sends, then
  `data: [DONE]`; `usage` where the model reports its token counts.
- `POST /v1/embeddings`: an embedding model's vectors, as floats or base64.

Requests go through the core as every other inference (its queue, limits, metrics and statistics): a decoupled model
through its stream (`infer_stream`), any other model with one call. A streamed answer is the HTTP/1.1 server's
(`HttpResponse.stream`): the next piece is taken from the model only once the client took what was sent before, a
client that takes nothing for the body timeout is dropped, and a client that leaves cancels the generation.
Every refusal has OpenAI's error shape (errors.py); an `Authorization: Bearer <key>` is required when the port has
an API key.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import hmac
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from typing import Any

import orjson

from pytriton.core.server_core import ServerCore
from pytriton.core.trace import HTTP_RECV_START, HTTP_SEND_END, Trace, Tracer, finish_on_sent, now_ns
from pytriton.core.types import InferRequest, InferResponse
from pytriton.exceptions import ServerError
from pytriton.frontend.http1 import HttpRequest, HttpResponse
from pytriton.frontend.openai.chat_template import ChatTemplate, plain_template
from pytriton.frontend.openai.conventions import ModelInterface, embedding_values, text_bytes, token_counts
from pytriton.frontend.openai.errors import INVALID, OpenAIError, invalid
from pytriton.frontend.openai.schemas import (
    TextRequest,
    chat_request,
    completion_request,
    embedding_request,
    parse_json,
)

logger = logging.getLogger("pytriton.frontend")

JSON = ("Content-Type", "application/json")
EVENT_STREAM = ("Content-Type", "text/event-stream; charset=utf-8")
OWNED_BY = "pytriton"
DONE = b"data: [DONE]\n\n"
_ROUTES = {"/v1/completions": "POST", "/v1/chat/completions": "POST", "/v1/embeddings": "POST",
           "/v1/models": "GET"}


def _json(obj: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(status, [orjson.dumps(obj)], [JSON])


class OpenAIApp:
    """Answers the OpenAI routes over `core`; `api_key`: the Bearer key clients must send (None: none needed);
    `tracer`: the server's, which traces the inferences as it traces the HTTP port's (HTTP_RECV_START when the
    request came, HTTP_SEND_END once its answer, the whole stream for a streamed one, has been handed over)."""

    def __init__(self, core: ServerCore, api_key: str | None = None, template: ChatTemplate = plain_template,
                 tracer: Tracer | None = None):  # fmt: skip
        self.core = core
        self.tracer = tracer
        self.api_key = api_key.encode() if api_key else None
        self.template = template
        self.created = int(time.time())

    async def handle(self, request: HttpRequest) -> HttpResponse:
        try:
            self._check_key(request)
            return await self._route(request)
        except OpenAIError as exc:
            return exc.response()
        except ServerError as exc:
            return OpenAIError.of(exc).response()
        except Exception:  # a bug here must not answer a traceback
            logger.exception("OpenAI port: %s %s failed", request.method, request.path)
            return OpenAIError(500, "The server had an error while processing your request.", "server_error").response()

    def _trace(self, request: HttpRequest, infer: InferRequest) -> Trace | None:
        """Start the trace of `infer` when tracing is on and picks it."""
        if self.tracer is None or not self.tracer.active:
            return None
        received = now_ns()
        trace = self.tracer.start(infer.model_name, infer.model_version, request.headers.get("traceparent"))
        if trace is not None:
            trace.stamp(HTTP_RECV_START, received)
            infer.trace = trace
        return trace

    def _traced(self, trace: Trace | None, response: HttpResponse) -> HttpResponse:
        if trace is not None and self.tracer is not None:
            response.on_sent = finish_on_sent(self.tracer, trace, HTTP_SEND_END, response.on_sent)
        return response

    def _check_key(self, request: HttpRequest) -> None:
        if self.api_key is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, key = given.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise OpenAIError(401, "You didn't provide an API key. Provide it in the Authorization header as "
                                   "'Authorization: Bearer YOUR_KEY'.", INVALID)
        if not hmac.compare_digest(key.strip().encode(), self.api_key):
            raise OpenAIError(401, "Incorrect API key provided.", INVALID, code="invalid_api_key")

    async def _route(self, request: HttpRequest) -> HttpResponse:
        path = request.path.rstrip("/") or "/"
        if path.startswith("/v1/models/"):
            self._method(request, "GET")
            return _json(self._model_entry(self._ready_model(path[len("/v1/models/"):])))
        method = _ROUTES.get(path)
        if method is None:
            raise OpenAIError(404, f"Invalid URL ({request.method} {request.path})", INVALID, code="unknown_url")
        self._method(request, method)
        if path == "/v1/models":
            return _json({"object": "list", "data": [self._model_entry(name) for name in self._ready_names()]})
        obj = parse_json(request.body)
        if path == "/v1/embeddings":
            return await self._embeddings(request, obj)
        chat = path == "/v1/chat/completions"
        return await self._text(request, chat_request(obj) if chat else completion_request(obj), chat)

    @staticmethod
    def _method(request: HttpRequest, method: str) -> None:
        if request.method != method:
            raise OpenAIError(405, f"Method {request.method} is not allowed for {request.path}; use {method}.",
                              INVALID, code="method_not_allowed")

    # ---- models ------------------------------------------------------------------------------
    def _ready_names(self) -> list[str]:
        return sorted({entry["name"] for entry in self.core.repository_index(True)})

    def _ready_model(self, name: str) -> str:
        if name not in self._ready_names():
            raise OpenAIError(404, f"The model '{name}' does not exist.", INVALID, "model", "model_not_found")
        return name

    def _model_entry(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": self.created, "owned_by": OWNED_BY}

    def _interface(self, name: str) -> ModelInterface:
        try:
            metadata = self.core.model_metadata(name)
            decoupled = self.core.registry.get(name).config.decoupled
        except ServerError as exc:
            raise OpenAIError(404, f"The model '{name}' does not exist.", INVALID, "model",
                              "model_not_found") from exc
        return ModelInterface.of(metadata, decoupled)

    # ---- inference ---------------------------------------------------------------------------
    async def _responses(self, model: ModelInterface, request: InferRequest) -> AsyncGenerator[InferResponse, None]:
        """The model's responses to `request`: its stream if decoupled, else its one answer."""
        if not model.decoupled:
            yield await self.core.infer(request)
            return
        stream = self.core.infer_stream(request)
        try:
            async for response in stream:
                yield response
        finally:
            await stream.aclose()

    async def _text(self, request: HttpRequest, text: TextRequest, chat: bool) -> HttpResponse:
        model = self._interface(text.model)
        if not model.generates_text:
            raise invalid(f"model '{model.name}' does not generate text: it follows neither vLLM's convention "
                          "(text_input, sampling_parameters -> text_output) nor TensorRT-LLM's (text_input -> "
                          "text_output)", "model")
        prompt = self.template(text.messages) if chat else text.prompt
        infer = model.text_request(prompt, text)
        trace = self._trace(request, infer)
        try:
            return self._traced(trace, await self._generate(model, infer, text, chat))
        except BaseException:
            if trace is not None and self.tracer is not None:
                self.tracer.finish(trace)
            raise

    async def _generate(self, model: ModelInterface, infer: InferRequest, text: TextRequest, chat: bool
                        ) -> HttpResponse:  # fmt: skip
        responses = self._responses(model, infer)
        answer = _Answer(model.name, chat, text)
        if text.stream:
            try:
                first = await anext(responses)
            except StopAsyncIteration:
                first = None
            except ServerError as exc:
                await responses.aclose()
                raise OpenAIError.of(exc) from None
            except BaseException:
                await responses.aclose()
                raise
            return HttpResponse(200, [], [EVENT_STREAM], stream=answer.events(first, responses))
        try:
            async for response in responses:
                answer.add(response)
        except ServerError as exc:
            raise OpenAIError.of(exc) from None
        finally:
            await responses.aclose()
        return _json(answer.whole())

    async def _embeddings(self, request: HttpRequest, obj: dict[str, Any]) -> HttpResponse:
        embedding = embedding_request(obj)
        model = self._interface(embedding.model)
        if not model.embeds:
            raise invalid(f"model '{model.name}' does not embed: it takes no 'embedding_request' (vLLM's convention) "
                          "and has no 'text_input' input with an 'embedding' output", "model")
        if embedding.dimensions is not None and model.kind != "vllm_embedding":
            raise invalid(f"model '{model.name}' does not take 'dimensions'", "dimensions")

        async def one(infer: InferRequest) -> tuple[Any, int | None]:
            response = None
            trace = self._trace(request, infer)
            responses = self._responses(model, infer)
            try:
                async for item in responses:
                    if response is None:
                        response = item
                    else:
                        item.release()
            finally:
                await responses.aclose()
                if trace is not None and self.tracer is not None:
                    trace.stamp(HTTP_SEND_END)  # (its part of the answer is made: the answer goes out at once)
                    self.tracer.finish(trace)
            if response is None:
                raise invalid(f"model '{model.name}' answered no embedding")
            try:
                values = embedding_values(model.kind or "", response)
                tokens = token_counts(response)[0]
            finally:
                response.release()
            if embedding.base64:
                return base64.b64encode(values.tobytes()).decode("ascii"), tokens
            return values.tolist(), tokens

        try:
            results = await asyncio.gather(*(one(r) for r in model.embedding_requests(embedding)))
        except ServerError as exc:
            raise OpenAIError.of(exc) from None
        tokens = sum(t or 0 for _, t in results)
        return _json({"object": "list", "model": model.name,
                      "data": [{"object": "embedding", "index": i, "embedding": v} for i, (v, _) in enumerate(results)],
                      "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


class _Answer:
    """One completion's answer as it is built: its text, token counts and chunks (the JSON of a chunk is its fixed
    prefix, the piece's text, its fixed suffix: one small `orjson.dumps` a piece)."""

    def __init__(self, model: str, chat: bool, text: TextRequest):
        self.model = model
        self.chat = chat
        self.request = text
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.kind = "chat.completion" if chat else "text_completion"
        self.pieces: list[str] = []
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.sent = 0  # pieces sent
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")  # (a piece may end inside a character)
        head = (b'{"id":"%s","object":"%s","created":%d,"model":%s,"choices":[{"index":0,'
                % (self.id.encode(), (self.kind + ".chunk" if chat else self.kind).encode(), self.created,
                   orjson.dumps(model)))
        self._prefix = b"data: " + head + (b'"delta":{"content":' if chat else b'"text":')
        self._suffix = (b'},' if chat else b',') + b'"logprobs":null,"finish_reason":null}]}\n\n'
        self._head = head

    def _read(self, response: InferResponse) -> str:
        try:
            data = text_bytes(response)
            prompt, output = token_counts(response)
        finally:
            response.release()
        if prompt is not None:
            self.prompt_tokens = prompt
        if output is not None:
            self.completion_tokens = (self.completion_tokens or 0) + output
        return self._decoder.decode(data) if data else ""

    def add(self, response: InferResponse) -> None:
        piece = self._read(response)
        if piece:
            self.pieces.append(piece)

    def _finish_reason(self) -> str:
        limit = self.request.max_tokens
        return "length" if limit is not None and self.completion_tokens is not None and \
            self.completion_tokens >= limit else "stop"

    def _usage(self) -> dict[str, int] | None:
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens}

    def whole(self) -> dict[str, Any]:
        """The non-streaming answer."""
        text = "".join(self.pieces) + self._decoder.decode(b"", final=True)
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": self._finish_reason()}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        answer: dict[str, Any] = {"id": self.id, "object": self.kind, "created": self.created, "model": self.model,
                                  "choices": [choice]}
        usage = self._usage()
        if usage is not None:
            answer["usage"] = usage
        return answer

    def _chunk(self, piece: str) -> bytes:
        return self._prefix + orjson.dumps(piece) + self._suffix

    def _last(self) -> bytes:
        delta = b'"delta":{},' if self.chat else b'"text":"",'
        return b"data: " + self._head + delta + b'"logprobs":null,"finish_reason":"%s"}]}\n\n' % (
            self._finish_reason().encode())

    async def events(self, first: InferResponse | None, responses: AsyncGenerator[InferResponse, None]
                     ) -> AsyncGenerator[bytes, None]:  # fmt: skip
        """The streamed answer: a chunk per piece, the last with the finish reason, the usage chunk when asked for,
        then `[DONE]`; a model error after the first piece ends it with an error event. Closed by the connection
        however it ends: the request is cancelled if the model has not finished."""
        finished = False
        try:
            if self.chat:
                yield b"data: " + self._head + b'"delta":{"role":"assistant","content":""},"logprobs":null,' \
                      b'"finish_reason":null}]}\n\n'
            if first is not None:
                piece = self._read(first)
                if piece:
                    self.sent += 1
                    yield self._chunk(piece)
                while True:
                    try:
                        response = await anext(responses)
                    except StopAsyncIteration:
                        break
                    except ServerError as exc:
                        yield b"data: " + orjson.dumps(OpenAIError.of(exc).body()) + b"\n\n"
                        finished = True
                        return
                    piece = self._read(response)
                    if piece:
                        self.sent += 1
                        yield self._chunk(piece)
            rest = self._decoder.decode(b"", final=True)
            if rest:
                yield self._chunk(rest)
            yield self._last()
            usage = self._usage()
            if self.request.include_usage and usage is not None:
                yield b"data: " + orjson.dumps({"id": self.id, "object": self.kind + ".chunk" if self.chat else
                                                self.kind, "created": self.created, "model": self.model,
                                                "choices": [], "usage": usage}) + b"\n\n"
            yield DONE
            finished = True
        finally:
            await responses.aclose()
            if not finished:
                logger.debug("OpenAI stream %s of model '%s' closed by its client after %d pieces; its request is "
                             "cancelled", self.id, self.model, self.sent)


__all__ = ["OWNED_BY", "OpenAIApp"]
