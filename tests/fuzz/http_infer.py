"""Triton's HTTP infer route: JSON inference bodies and the binary tensor extension (`Inference-Header-Content-Length`),
compressed bodies, through `HttpApp` on a real `ServerCore` whose models answer at once (a fake scheduler echoes the
inputs as the outputs: no workers).

An input is one request: "METHOD URL", header lines ("name: value"), an empty line, then the body (lines end with
LF). The route's own errors are answers with Triton's statuses and `{"error": ...}` bodies; a 500 is a finding unless
it is one of the parse errors Triton itself answers with 500 (`INTERNAL_PARSE_ERRORS`), and so is an answer that is
not JSON. The callback route (`HttpApp.begin`, with its cache of parsed headers) must answer what the coroutine route
(`HttpApp.handle`) answers: each input goes through `begin` twice from empty caches (the second time from the cache),
then through `handle`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from pytriton.core.registry import Model
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.core.types import ExecutionOutput, Tensor
from pytriton.frontend.http.app import HttpApp
from pytriton.frontend.http.infer_begin import InferAnswer
from pytriton.frontend.http1 import HttpRequest, HttpResponse
from pytriton.model_config.triton_model_config import DynamicBatcher, TensorSpec, TritonModelConfig
from pytriton.scheduler.job import Delivery, ExecutionStats
from tests.fuzz.harness import Finding, Harness

MAX_INPUT_BYTES = 256 << 10
# Triton answers these parse errors with 500 (`internal`), and so do we.
INTERNAL_PARSE_ERRORS = ("Unable to parse 'data'", "Failed to parse 'data'", "Unable to parse 'priority'",
                         "Unable to parse 'timeout'")
MODELS = [
    TritonModelConfig("m", inputs=[TensorSpec("INPUT", "FP32", (-1,))], outputs=[TensorSpec("OUTPUT", "FP32", (-1,))],
                      max_batch_size=8, batcher=DynamicBatcher()),
    TritonModelConfig("s", inputs=[TensorSpec("TEXT", "BYTES", (-1,)), TensorSpec("N", "INT32", (2,), True)],
                      outputs=[TensorSpec("OUT", "BYTES", (-1,)), TensorSpec("NOUT", "INT32", (2,))],
                      max_batch_size=4),
    TritonModelConfig("raw", inputs=[TensorSpec("IN", "UINT8", (-1,))], outputs=[TensorSpec("OUT", "UINT8", (-1,))]),
]


class EchoScheduler:
    """Answers each job at the end of the loop turn: output i is input i's data under output i's name."""

    batching = None
    ready = True
    queue_size = 0
    executions_in_flight = 0

    def __init__(self, config: TritonModelConfig):
        self.config = config
        self.jobs: list[Any] = []

    def submit(self, job: Any) -> None:
        job.enqueued_ns = time.perf_counter_ns()
        if not self.jobs:
            asyncio.get_running_loop().call_soon(self.run)
        self.jobs.append(job)

    def run(self) -> None:
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            if job.abandoned:
                continue
            outputs = [Tensor(spec.name, tensor.datatype, tuple(tensor.shape), bytes(tensor.data or b""))
                       for spec, tensor in zip(self.config.outputs, job.payload.inputs)]
            job.deliver(Delivery(ExecutionOutput(outputs), ExecutionStats(), 0))

    def withdraw(self, job: Any) -> None:
        if job in self.jobs:
            self.jobs.remove(job)
            job.finish()
        else:
            job.abandon()

    def fail_all(self, message: str) -> None:
        pass


def parse_request(data: bytes) -> HttpRequest:
    head, _, body = data.partition(b"\n\n")
    lines = head.decode("latin-1").split("\n")
    method, _, url = lines[0].partition(" ")
    path, _, query = url.partition("?")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return HttpRequest(method, path, query, headers, body, "127.0.0.1")


def outcome(response: HttpResponse) -> tuple[int, bytes]:
    body = b"".join(bytes(part) for part in response.parts)
    if response.on_sent is not None:
        response.on_sent()
    return response.status, body


def check_answer(status: int, body: bytes) -> None:
    if status == 200:
        return
    try:
        message = orjson.loads(body)["error"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise Finding(f"answer {status} without a JSON error", repr(body[:200])) from None
    if status >= 500 and not (status == 500 and message.startswith(INTERNAL_PARSE_ERRORS)) and status not in (501, 503):
        raise Finding(f"answer {status}", message)


class HttpInferHarness(Harness):
    name = "http_infer"
    max_len = 8192
    memory_fixed = 8 << 20  # a compressed body inflates to at most MAX_INPUT_BYTES (+ a 1 MiB step), then is parsed
    memory_per_byte = 64

    def setup(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._start())

    async def _start(self) -> None:
        self.core = ServerCore()
        await self.core.start()
        self.models = []
        for config in MODELS:
            scheduler: Any = EchoScheduler(config)
            model = Model(config=config, scheduler=scheduler, source=None, loaded=True)  # type: ignore[arg-type]
            self.core.registry.add(model)
            self.models.append(model)
        self.app = HttpApp(self.core, LogSettings(), TraceSettings(), max_input_bytes=MAX_INPUT_BYTES)

    def close(self) -> None:
        self.loop.close()

    def _forget(self) -> None:
        self.app.header_cache = type(self.app.header_cache)()
        for model in self.models:
            model.layouts.clear()

    async def _begin(self, request: HttpRequest) -> tuple[int, bytes] | None:
        answer = self.app.begin(request)
        if answer is None:
            return None
        if isinstance(answer, InferAnswer):
            await answer.future
            return outcome(answer.answer())
        return outcome(answer)

    async def _one(self, data: bytes) -> None:
        request = parse_request(data)
        self._forget()
        first = await self._begin(request)
        cached = await self._begin(request)
        handled = outcome(await self.app.handle(request))
        check_answer(*handled)
        for name, got in (("begin", first), ("begin from its cache", cached)):
            if got is not None and got != handled:
                raise Finding(f"{name} answers otherwise than handle", f"{name}: {got!r}\nhandle: {handled!r}")

    def one_input(self, data: bytes) -> None:
        self.loop.run_until_complete(self._one(data))
