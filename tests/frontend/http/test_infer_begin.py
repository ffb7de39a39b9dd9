"""`HttpApp.begin`: which requests the callback route takes (the rest go to `handle`), and that what it answers is what
`handle` answers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest

from pytriton.core.registry import Model
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.core.types import ExecutionOutput, Tensor
from pytriton.frontend.http.app import HttpApp
from pytriton.frontend.http.infer_begin import InferAnswer
from pytriton.frontend.http1 import HttpRequest, HttpResponse
from pytriton.model_config.triton_model_config import DynamicBatcher, TensorSpec, TritonModelConfig
from pytriton.scheduler.job import Delivery, ExecutionStats

HEADER = (b'{"inputs":[{"name":"INPUT","shape":[1,16],"datatype":"FP32","parameters":{"binary_data_size":64}}],'
          b'"outputs":[{"name":"OUTPUT","parameters":{"binary_data":true}}]}')


class Scheduler:
    """Answers each job at the end of the loop turn with OUTPUT = 16 floats of 7s' bytes."""

    batching = object()
    ready = True
    queue_size = 0
    executions_in_flight = 0

    def __init__(self) -> None:
        self.jobs: list[Any] = []
        self.withdrawn = 0

    def submit(self, job: Any) -> None:
        job.enqueued_ns = time.perf_counter_ns()
        if not self.jobs:
            asyncio.get_running_loop().call_soon(self.run)
        self.jobs.append(job)

    def run(self) -> None:
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            if not job.abandoned:
                job.deliver(Delivery(ExecutionOutput([Tensor("OUTPUT", "FP32", (1, 16), b"\x07" * 64)]),
                                     ExecutionStats(), 0))

    def withdraw(self, job: Any) -> None:
        self.withdrawn += 1
        if job in self.jobs:  # queued: it leaves the queue and ends, as the real scheduler's
            self.jobs.remove(job)
            job.finish()
        else:
            job.abandon()

    def fail_all(self, message: str) -> None:
        pass


async def make_app() -> tuple[HttpApp, Scheduler, ServerCore]:
    config = TritonModelConfig("m", inputs=[TensorSpec("INPUT", "FP32", (16,))],
                               outputs=[TensorSpec("OUTPUT", "FP32", (16,))], max_batch_size=8,
                               batcher=DynamicBatcher())
    core = ServerCore()
    await core.start()
    scheduler = Scheduler()
    core.registry.add(Model(config=config, scheduler=scheduler, source=None, loaded=True))  # type: ignore[arg-type]
    return HttpApp(core, LogSettings(), TraceSettings()), scheduler, core


def request(path: str = "/v2/models/m/infer", method: str = "POST", body: bytes = HEADER + bytes(64),
            **headers: str) -> HttpRequest:  # fmt: skip
    fields = {"inference-header-content-length": str(len(HEADER))}
    fields.update({k.replace("_", "-"): v for k, v in headers.items()})
    return HttpRequest(method, path, "", fields, body, "127.0.0.1")


async def answer_of(app: HttpApp, started: Any) -> HttpResponse:
    assert isinstance(started, InferAnswer)
    await asyncio.wait({started.future}, timeout=5)  # (done with a result or an error)
    assert started.future.done()
    return started.answer()


def plain(response: HttpResponse) -> tuple[int, list[tuple[str, str]], bytes]:
    return response.status, response.headers, b"".join(bytes(p) for p in response.parts)


@pytest.mark.parametrize("path", ["/v2/models/m/infer", "/v2/models/m/versions/1/infer", "/v2/models/%6d/infer"])
def test_taken_requests_answer_as_handle(path):
    async def test() -> None:
        app, _, core = await make_app()
        for headers in ({}, {"accept_encoding": "identity"}, {"content_encoding": "identity"}):
            begun = await answer_of(app, app.begin(request(path, **headers)))
            handled = await app.handle(request(path, **headers))
            assert plain(begun) == plain(handled) and begun.status == 200
            assert begun.on_sent is not None
            begun.on_sent()
            handled.on_sent()  # type: ignore[misc]
        assert core.registry.get("m").stats.inference_count == 6

    asyncio.run(test())


@pytest.mark.parametrize("req", [
    request(accept_encoding="gzip"), request(accept_encoding="deflate;q=0.5, identity"),
    request(content_encoding="gzip"), request(method="GET"), request(method="PUT"),
    request("/v2/models/m/infer/"), request("/v2/models/unknown/infer"), request("/v2/models/m/versions/x/infer"),
    request("/v2/models//infer"), request("/v2/models/m/ready"), request("/v2/models/m"), request("/v3/models/m/infer"),
    request("/v2/models/m/versions/1/x/infer"),
], ids=lambda r: f"{r.method} {r.path} {sorted(r.headers.items())}")
def test_requests_left_to_handle(req):
    async def test() -> None:
        app, _, _ = await make_app()
        assert app.begin(req) is None

    asyncio.run(test())


def test_left_to_handle_while_tracing():
    async def test() -> None:
        app, _, _ = await make_app()
        app.tracer.active = True  # (what a trace level other than OFF with a sink sets: the flag begin reads)
        assert app.begin(request()) is None

    asyncio.run(test())


@pytest.mark.parametrize("body, headers", [
    (HEADER + bytes(60), {}),
    (HEADER + bytes(68), {}),
    (b"{not json" + bytes(64), {}),
    (HEADER + bytes(64), {"inference_header_content_length": "x"}),
    (orjson.dumps({"inputs": [{"name": "INPUT", "shape": [1, 15], "datatype": "FP32",
                               "parameters": {"binary_data_size": 60}}]}) + bytes(60), {}),
    (orjson.dumps({"inputs": [{"name": "NOPE", "shape": [1, 16], "datatype": "FP32",
                               "parameters": {"binary_data_size": 64}}]}) + bytes(64), {}),
], ids=["short", "long", "bad-json", "bad-length", "bad-shape", "unknown-input"])
def test_errors_answer_as_handle(body, headers):
    async def test() -> None:
        app, _, _ = await make_app()
        for _ in range(2):  # (the second time with the header kept, where it was)
            fields = {"inference_header_content_length": str(body.index(b"}]}") + 3 if body.startswith(b"{\"")
                                                                else 9)} | headers
            begun = app.begin(request(body=body, **fields))
            assert isinstance(begun, HttpResponse)
            handled = await app.handle(request(body=body, **fields))
            assert plain(begun) == plain(handled) and begun.status == 400

    asyncio.run(test())


def test_cancelled_answer_withdraws_its_job():
    async def test() -> None:
        app, scheduler, core = await make_app()
        started = app.begin(request())
        assert isinstance(started, InferAnswer)
        started.cancel()
        await asyncio.sleep(0)
        assert scheduler.withdrawn == 1 and started.future.cancelled()
        stats = core.registry.get("m").stats.to_dict("m", "1")
        assert stats["inference_count"] == 0 and stats["inference_stats"]["fail"]["count"] == 1  # (CANCELED)
        assert core._in_flight == 0

    asyncio.run(test())


def test_a_model_error_answers_as_handle():
    async def test() -> None:
        app, scheduler, _ = await make_app()

        def run() -> None:
            jobs, scheduler.jobs = scheduler.jobs, []
            for job in jobs:
                job.fail(RuntimeError("boom"))

        scheduler.run = run  # type: ignore[method-assign]
        begun = await answer_of(app, app.begin(request()))
        handled = await app.handle(request())
        assert plain(begun) == plain(handled) and begun.status == 500
        assert "internal error while running model 'm': boom" in begun.parts[0].decode()

    asyncio.run(test())
