"""`HttpApp.begin`: every infer request begins on the one path (compressed, traced, a model with a response cache), a
refusal is answered at once, and any other route is matched once and left to `handle`."""

from __future__ import annotations

import asyncio
import gzip
import time
import zlib
from typing import Any

import orjson
import pytest

from pytriton.core.registry import Model
from pytriton.core.response_cache import ResponseCache
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


@pytest.mark.parametrize("path", ["/v2/models/m/infer", "/v2/models/m/versions/1/infer", "/v2/models/%6d/infer",
                                  "/v2/models/m/infer/"])
def test_infer_routes_begin_and_answer(path):
    async def test() -> None:
        app, _, core = await make_app()
        for headers in ({}, {"accept_encoding": "identity"}, {"content_encoding": "identity"}):
            begun = await answer_of(app, app.begin(request(path, **headers)))
            assert plain(begun)[0] == 200 and plain(begun)[2].endswith(b"\x07" * 64)
            assert begun.on_sent is not None
            begun.on_sent()
        handled = await app.handle(request(path))  # (a route run as a coroutine: begun and awaited)
        assert plain(handled) == plain(begun)
        handled.on_sent()  # type: ignore[misc]
        assert core.registry.get("m").stats.inference_count == 4

    asyncio.run(test())


@pytest.mark.parametrize("encoding", ["gzip", "deflate;q=0.5, identity"])
def test_a_compressed_answer_is_begun_too(encoding):
    async def test() -> None:
        app, _, _ = await make_app()
        plain_answer = plain(await answer_of(app, app.begin(request())))
        compressed = await answer_of(app, app.begin(request(accept_encoding=encoding)))
        name = encoding.split(";")[0]
        assert ("Content-Encoding", name) in compressed.headers
        body = b"".join(bytes(p) for p in compressed.parts)
        assert (gzip.decompress(body) if name == "gzip" else zlib.decompress(body)) == plain_answer[2]

    asyncio.run(test())


def test_a_compressed_body_is_begun_too():
    async def test() -> None:
        app, _, _ = await make_app()
        answer = await answer_of(app, app.begin(request(body=gzip.compress(HEADER + bytes(64)),
                                                        content_encoding="gzip")))
        assert answer.status == 200

    asyncio.run(test())


@pytest.mark.parametrize("req, status", [
    (request(method="GET"), 405), (request(method="PUT"), 405), (request("/v2/models/unknown/infer"), 404),
    (request("/v2/models/m/versions/x/infer"), 404), (request("/v2/models//infer"), 404),
    (request("/v3/models/m/infer"), 404), (request("/v2/models/m/versions/1/x/infer"), 404),
    (request(content_encoding="gzip"), 400),
], ids=lambda r: f"{r.method} {r.path} {sorted(r.headers.items())}" if isinstance(r, HttpRequest) else str(r))
def test_refusals_are_answered_at_once(req, status):
    async def test() -> None:
        app, _, _ = await make_app()
        answer = app.begin(req)
        assert isinstance(answer, HttpResponse) and answer.status == status

    asyncio.run(test())


@pytest.mark.parametrize("path", ["/v2/models/m/ready", "/v2/models/m", "/v2/health/live", "/v2/models/stats"])
def test_other_routes_are_matched_once_for_handle(path, monkeypatch):
    async def test() -> None:
        app, _, _ = await make_app()
        req = request(path, method="GET")
        assert app.begin(req) is None and req.route is not None  # (what `handle` runs, found by `begin`)
        monkeypatch.setattr(app.routes, "match", None)  # (matching again would fail)
        assert (await app.handle(req)).status == 200

    asyncio.run(test())


def test_traced_requests_take_the_same_path():
    async def test() -> None:
        app, _, _ = await make_app()
        app.tracer.active = True  # (what a trace level other than OFF with a sink sets: the flag begin reads)
        answer = await answer_of(app, app.begin(request()))
        assert answer.status == 200

    asyncio.run(test())


def test_a_model_with_a_response_cache_takes_the_same_path():
    """Before the one path, `begin` left such a model to `handle` (None)."""
    async def test() -> None:
        app, scheduler, core = await make_app()
        model = core.registry.get("m")
        model.cache = ResponseCache(1 << 20)
        submitted: list[Any] = []
        submit = scheduler.submit
        scheduler.submit = lambda job: (submitted.append(job), submit(job))  # type: ignore[method-assign]
        first = await answer_of(app, app.begin(request()))
        second = await answer_of(app, app.begin(request()))
        assert plain(first) == plain(second) and first.status == 200
        assert len(submitted) == 1  # the second was a hit: no job
        stats = model.stats.to_dict("m", "1")
        assert stats["inference_stats"]["cache_hit"]["count"] == 1
        assert stats["inference_stats"]["cache_miss"]["count"] == 1

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
def test_errors_are_answered_at_once(body, headers):
    async def test() -> None:
        app, _, _ = await make_app()
        answers = []
        for _ in range(2):  # (the second time with the header kept, where it was)
            fields = {"inference_header_content_length": str(body.index(b"}]}") + 3 if body.startswith(b"{\"")
                                                                else 9)} | headers
            begun = app.begin(request(body=body, **fields))
            assert isinstance(begun, HttpResponse) and begun.status == 400
            answers.append(plain(begun))
            assert b'"error"' in answers[-1][2]
        assert answers[0] == answers[1]

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
        assert core.in_flight == 0

    asyncio.run(test())


def test_a_model_error_answers_500():
    async def test() -> None:
        app, scheduler, _ = await make_app()

        def run() -> None:
            jobs, scheduler.jobs = scheduler.jobs, []
            for job in jobs:
                job.fail(RuntimeError("boom"))

        scheduler.run = run  # type: ignore[method-assign]
        begun = await answer_of(app, app.begin(request()))
        assert begun.status == 500
        assert "internal error while running model 'm': boom" in begun.parts[0].decode()

    asyncio.run(test())
