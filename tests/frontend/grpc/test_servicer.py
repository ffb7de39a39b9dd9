"""The gRPC servicer without a transport: a fake context shows how each error ends a call."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from tritonclient.grpc import service_pb2 as pb

from pytriton.core.registry import Model
from pytriton.core.response_cache import ResponseCache
from pytriton.core.server_core import ServerCore
from pytriton.core.types import ExecutionOutput, Tensor
from pytriton.frontend.access import GRPC_HEADER_PREFIX, AccessPolicy
from pytriton.frontend.grpc.servicer import InferenceServicer
from pytriton.frontend.grpc.wire import parse_infer_request
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.scheduler.job import Delivery, ExecutionStats

TOKEN_HEADER = GRPC_HEADER_PREFIX + "triton-access-token"


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(code, details)
        self.code, self.details = code, details


class FakeContext:
    def __init__(self, metadata=(), peer: str = "ipv4:127.0.0.1:5000"):
        self.metadata = tuple(metadata)
        self._peer = peer

    def invocation_metadata(self):
        return self.metadata

    def peer(self) -> str:
        return self._peer

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise Aborted(code, details)


def run(coroutine_function):
    """Run `coroutine_function(servicer)` on a fresh loop with a started core and no models."""

    async def main():
        core = ServerCore()
        await core.start()
        access = AccessPolicy.from_specs(["logging,inference:triton-access-token=t"], header_prefix=GRPC_HEADER_PREFIX)
        return await coroutine_function(InferenceServicer(core, access=access))

    return asyncio.run(main())


def aborted(call) -> Aborted:
    async def main(servicer):
        with pytest.raises(Aborted) as info:
            await call(servicer)
        return info.value

    return run(main)


def test_server_errors_end_the_call_with_their_status():
    error = aborted(lambda s: s.ModelMetadata(pb.ModelMetadataRequest(name="nope"), FakeContext()))
    assert (error.code, error.details) == (grpc.StatusCode.NOT_FOUND, "Request for unknown model: 'nope' is not found")
    error = aborted(lambda s: s.ModelStatistics(pb.ModelStatisticsRequest(name="nope"), FakeContext()))
    assert (error.code, error.details) == (grpc.StatusCode.INVALID_ARGUMENT, "requested model 'nope' is not available")
    error = aborted(lambda s: s.ModelReady(pb.ModelReadyRequest(name="nope", version="abc"), FakeContext()))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT


def test_unknown_model_is_not_ready():
    response = run(lambda s: s.ModelReady(pb.ModelReadyRequest(name="nope"), FakeContext()))
    assert response.ready is False


def test_access_refusals():
    error = aborted(lambda s: s.LogSettings(pb.LogSettingsRequest(), FakeContext()))
    assert (error.code, error.details) == (
        grpc.StatusCode.UNAVAILABLE, f"This protocol is restricted, expecting header '{TOKEN_HEADER}'")
    response = run(lambda s: s.LogSettings(pb.LogSettingsRequest(), FakeContext([(TOKEN_HEADER, "t")])))
    assert "log_verbose_level" in response.settings
    remote = FakeContext(peer="ipv4:10.1.2.3:5000")
    error = aborted(lambda s: s.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(), remote))
    assert error.code == grpc.StatusCode.UNAVAILABLE
    assert error.details.startswith("This protocol is restricted to clients on the server's host")


def test_repeated_errors_are_fresh_exceptions():
    async def twice(servicer):
        errors = []
        for _ in range(2):
            with pytest.raises(Aborted) as info:
                await servicer.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="m"), FakeContext())
            errors.append(info.value)
        return errors

    first, second = run(twice)
    assert first.details == second.details == "explicit model load / unload is not allowed if polling is enabled"
    assert first.__context__ is not second.__context__


def test_bugs_are_not_mapped():
    """An error that carries no status goes on to the transport (which logs it and answers UNKNOWN)."""

    async def main(servicer):
        def broken():
            raise RuntimeError("a bug")

        servicer.core.server_metadata = broken
        with pytest.raises(RuntimeError, match="a bug"):
            await servicer.ServerMetadata(pb.ServerMetadataRequest(), FakeContext())

    run(main)


def test_restricted_stream_ends_before_reading_a_request():
    read = []

    async def requests():
        read.append(True)
        yield pb.ModelInferRequest(model_name="m")

    async def main(servicer):
        stream = servicer.ModelStreamInfer(requests(), FakeContext())
        with pytest.raises(Aborted) as info:
            await stream.__anext__()
        return info.value

    error = run(main)
    assert error.code == grpc.StatusCode.UNAVAILABLE
    assert read == []


def test_every_model_infer_begins_a_call():
    """`begin_model_infer` (the HTTP/2 transport's ModelInfer) takes a model with a response cache and a traced
    request too: one path, never None for the handler to run instead. The second identical request is a cache hit."""
    class Scheduler:
        batching = None
        submitted = 0

        def submit(self, job) -> None:
            Scheduler.submitted += 1
            job.enqueued_ns = time.perf_counter_ns()
            asyncio.get_running_loop().call_soon(job.deliver, Delivery(
                ExecutionOutput([Tensor("OUTPUT", "FP32", (4,), b"\x07" * 16)]), ExecutionStats(), 0))

        def withdraw(self, job) -> None:
            job.abandon()

    async def main():
        core = ServerCore()
        await core.start()
        config = TritonModelConfig("m", inputs=[TensorSpec("INPUT", "FP32", (4,))],
                                   outputs=[TensorSpec("OUTPUT", "FP32", (4,))])
        model = Model(config=config, scheduler=Scheduler(), source=None, loaded=True,  # type: ignore[arg-type]
                      cache=ResponseCache(1 << 20))
        core.registry.add(model)
        servicer = InferenceServicer(core)
        servicer.tracer.active = True  # (what a trace level other than OFF with a sink sets)
        message = pb.ModelInferRequest(model_name="m", inputs=[pb.ModelInferRequest.InferInputTensor(
            name="INPUT", datatype="FP32", shape=[4])], raw_input_contents=[bytes(16)]).SerializeToString()
        for _ in range(2):
            call = servicer.begin_model_infer(parse_infer_request(message), FakeContext())
            assert call is not None
            await asyncio.wait({call.future}, timeout=5)
            assert call.answer() is not None
        assert Scheduler.submitted == 1  # the second was answered from the cache
        stats = core.registry.get("m").stats.to_dict("m", "1")["inference_stats"]
        assert stats["cache_hit"]["count"] == 1 and stats["cache_miss"]["count"] == 1

    asyncio.run(main())
