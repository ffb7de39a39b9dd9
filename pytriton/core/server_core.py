"""The protocol-free heart of the server: models, their lifecycle, inference and statistics.

Front-ends convert wire formats into `InferRequest`s and `begin` each unary one (a `Call`, core/calls.py) or
`infer_stream` a decoupled model's; every error comes out
as a `ServerError` with a Triton status, which each front-end maps to its own codes. A model's instances are
whatever its `InstanceSource` provides (worker processes, threads of a user's process): the core sees only
the model's scheduler, never a worker, a socket or a message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncGenerator, Callable

from pytriton.config.env import DEFAULT_PIPELINE_DEPTH
from pytriton.core.call_chain import reentry
from pytriton.core.calls import Call, RunCall, UnaryCall, answer, stream_responses
from pytriton.core.custom_metrics import CustomMetrics
from pytriton.core.ensemble import Ensemble
from pytriton.core.ensemble_run import infer_ensemble
from pytriton.core.latency_metrics import FirstResponseHistogram, LatencySummaries, MetricsSettings
from pytriton.core.output_holds import Hold, OutputHolds
from pytriton.core.peers import Peers
from pytriton.core.received import ReceivedBuffers
from pytriton.core.regions_resolve import execution_request
from pytriton.core.registry import Model, ModelRegistry
from pytriton.core.repository import RepositoryControl, no_explicit_control, request_bytes
from pytriton.core.response_cache import ResponseCache, infer_cached, model_cache
from pytriton.core.sequence_controls import scheduler_for
from pytriton.core.shm_registry import Region, SharedMemoryRegistry
from pytriton.core.trace import QUEUE_START, REQUEST_START
from pytriton.core.types import ExecutionRequest, InferRequest, InferResponse
from pytriton.core.validation import batch_signature, drop_repeated_outputs, validate_layout, validate_request
from pytriton.exceptions import ServerError, invalid_arg, unavailable
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.scheduler.dispatcher import BatchPolicy
from pytriton.scheduler.instance import InstanceSource
from pytriton.scheduler.job import HELD, QUEUED, ExecutionStats, Job
from pytriton.scheduler.queue_policy import queue_rules, request_queueing

logger = logging.getLogger("pytriton.core")

SERVER_NAME = "triton"
# The Triton release whose protocol this server follows (tritonclient 2.73.0).
SERVER_VERSION = "2.73.0"
# As tritonserver 2.51 lists them, in its order (`schedule_policy`: the priority and timeout request parameters)
EXTENSIONS = ("classification", "sequence", "model_repository", "model_repository(unload_dependents)",
              "schedule_policy", "model_configuration", "system_shared_memory", "cuda_shared_memory",
              "binary_tensor_data", "parameters", "statistics", "trace", "logging")


class ServerCore:
    """Owns the model registry, the client shared-memory registry and the count of requests in flight."""

    def __init__(
        self,
        allow_client_shm: bool = True,
        gpu_available: bool = False,
        pipeline_depth: int = DEFAULT_PIPELINE_DEPTH,
        execution_timeout_s: float | None = None,
        metrics: MetricsSettings | None = None,
        response_cache: ResponseCache | None = None,  # `--cache-config local,size=BYTES`
        server_name: str = SERVER_NAME,  # Triton's `--id`
        strict_readiness: bool = True,  # Triton's `--strict-readiness`
        stall_s: float = 0.0,  # a model whose instances all made no progress this long while requests wait: not ready
    ):
        self.registry = ModelRegistry()
        self.server_name = server_name
        self.strict_readiness = strict_readiness
        self.failed_models: dict[str, tuple[int | None, str]] = {}  # left out at start (exit on error off): version, reason
        self.metrics = metrics or MetricsSettings()
        self.custom_metrics = CustomMetrics()  # Python-backend models' pb_utils.MetricFamily values
        self.extensions: list[str] = list(EXTENSIONS)
        self.shm = SharedMemoryRegistry(lambda: gpu_available, allow_client_shm)
        self.received = ReceivedBuffers(self.shm)  # large messages received into shared memory (front-ends)
        self.holds = OutputHolds()  # client output bytes that calls in flight may still write (core/output_holds.py)
        self.pipeline_depth = pipeline_depth
        self.response_cache = response_cache
        self.execution_timeout_s = execution_timeout_s
        self.stall_s = stall_s
        self.live = False
        self.accepting = False
        self._in_flight = 0
        self._drained: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop it started in (its jobs' futures belong to it)
        self.repository: RepositoryControl | None = None  # the repository extension's controller, when attached
        self.peers: Peers | None = None  # the other front-end processes of the group (core/peers.py)
        self._retiring: dict[int, Model] = {}  # by id: replaced or unloaded models finishing their requests

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._drained = asyncio.Event()
        self._drained.set()
        self.live = True
        self.accepting = True

    @property
    def ready(self) -> bool:
        """Triton's: up and accepting; with strict readiness also every model ready (one that failed to load counts)."""
        if not (self.live and self.accepting) or not self.strict_readiness:
            return self.live and self.accepting
        return not self.failed_models and all(m.ready for m in self.registry) and not (
            self.repository is not None and self.repository.unavailable())

    def model_failed(self, name: str, version: int | None, reason: str) -> None:
        """A model that failed to load at start and is left out: UNAVAILABLE with `reason` in the index (version None:
        its configuration could not be read; as Triton, the index shows its name alone)."""
        self.failed_models[name] = (version, reason)
        if version is not None:  # (one whose configuration was read went through Triton's lifecycle)
            self.registry.know(name)

    @property
    def in_flight(self) -> int:
        """Requests accepted and not yet ended (answered, failed, or withdrawn and their execution over)."""
        return self._in_flight

    # ---- models ------------------------------------------------------------------------------
    async def add_model(self, config: TritonModelConfig, source: InstanceSource) -> Model:
        """Serve `config` on the instances `source` provides; return once they have started.

        The model is registered (not ready) while its instances start; if they cannot, it is removed again
        and the error raised."""
        model = self._new_model(config, source)
        self.registry.add(model)
        try:
            await source.start()
        except BaseException:
            self.registry.remove(config.model_name, model)
            model.scheduler.fail_all(f"model '{config.model_name}' failed to start")
            raise
        model.loaded = True
        _count_warmup(model, source)
        self.failed_models.pop(config.model_name, None)  # served now (e.g. a bound model of that name)
        logger.info("model '%s' version %d ready (%d instance(s), max_batch_size %d)", config.model_name,
                    config.model_version, len(source.describe()), config.max_batch_size)
        return model

    def _new_model(self, config: TritonModelConfig, source: InstanceSource) -> Model:
        """A model (not registered yet) whose scheduler `source` feeds."""
        batching = None
        if config.batcher is not None and config.max_batch_size > 0:
            batching = BatchPolicy(config.max_batch_size, config.batcher.max_queue_delay_microseconds,
                                   tuple(config.batcher.preferred_batch_size or ()))
        stats_holder: list[Model] = []
        # Triton orders the responses of a dynamic batcher's requests; a decoupled model's are not ordered here
        ordered = config.batcher is not None and config.batcher.preserve_ordering and not config.decoupled
        scheduler = scheduler_for(config)(
            config.model_name, batching, self.pipeline_depth, self.execution_timeout_s,
            queueing=queue_rules(config.batcher), preserve_ordering=ordered,
            on_execution=lambda s: stats_holder[0].stats.record_execution(
                s.batch_size, s.compute_input_ns, s.compute_infer_ns, s.compute_output_ns),
        )
        scheduler.stall_ns = int(self.stall_s * 1e9)
        model = Model(config=config, scheduler=scheduler, source=source, cache=model_cache(config, self.response_cache))
        if isinstance(source, Ensemble):  # no instances: its requests run through its steps' models
            source.registry = self.registry
            model.ensemble = source
        if self.metrics.summary_latencies:
            model.stats.summaries = LatencySummaries(self.metrics)
        if self.metrics.histogram_latencies and config.decoupled:
            model.stats.first_response = FirstResponseHistogram()
        stats_holder.append(model)
        source.bind(scheduler)
        return model

    async def replace_model(self, config: TritonModelConfig, source: InstanceSource, timeout_s: float = 10.0) -> Model:
        """Serve `config` in place of the model of the same name and version without dropping a request: the new
        instances start first, new requests go to them once they have, and the old instances finish the requests
        they hold (within `timeout_s`) before they stop. Without that model version it is `add_model` (other
        versions of the model serve on)."""
        old = self.registry.find(config.model_name, config.model_version)
        if old is None:
            return await self.add_model(config, source)
        model = self._new_model(config, source)
        try:
            await source.start()
        except BaseException:
            model.scheduler.fail_all(f"model '{config.model_name}' failed to start")
            raise
        model.loaded = True
        _count_warmup(model, source)
        self.registry.replace(model)
        logger.info("model '%s' version %d ready in place of version %d", config.model_name, config.model_version,
                    old.version)
        await self._retire(old, timeout_s)
        return model

    async def _retire(self, model: Model, timeout_s: float) -> None:
        """Stop a model no longer in the registry once what it queued and runs has ended (or at `timeout_s`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self._retiring[id(model)] = model  # a stop meanwhile stops it too
        try:
            while (model.scheduler.queue_size or model.scheduler.executions_in_flight) and loop.time() < deadline:
                await asyncio.sleep(0.01)
            model.loaded = False
            model.scheduler.fail_all(f"model '{model.name}' was unloaded")
            await model.source.stop(max(0.0, deadline - loop.time()) or 1.0)
        finally:
            self._retiring.pop(id(model), None)

    async def unload_model(self, name: str, timeout_s: float = 10.0, graceful: bool = False,
                           version: int | None = None) -> None:
        """Stop serving a model (every version, or only `version`): it leaves the registry, queued requests fail,
        then its instances stop.

        `graceful`: the requests it queued and runs finish first (within `timeout_s`)."""
        if version is None:
            models = self.registry.remove_all(name)
        else:
            found = self.registry.find(name, version)
            models = [found] if found is not None and self.registry.remove(name, found) else []
        await asyncio.gather(*(self._stop_model(m, timeout_s, graceful) for m in models))

    async def _stop_model(self, model: Model, timeout_s: float, graceful: bool) -> None:
        if graceful:
            await self._retire(model, timeout_s)
        else:
            model.loaded = False
            model.scheduler.fail_all(f"model '{model.name}' was unloaded")
            await model.source.stop(timeout_s)
        logger.info("model '%s' version %d unloaded", model.name, model.version)

    def repository_index(self, ready_only: bool) -> list[dict[str, str]]:
        """The repository extension's index: the repository's models, else those served."""
        if self.repository is not None:
            return self.repository.index(ready_only)
        index = [{"name": m.name, "version": str(m.version), "state": "READY" if m.ready else "UNAVAILABLE"}
                 for m in self.registry if m.ready or not ready_only]
        if not ready_only:
            index += [{"name": name} if version is None else
                      {"name": name, "version": str(version), "state": "UNAVAILABLE", "reason": reason}
                      for name, (version, reason) in self.failed_models.items()]
        return sorted(index, key=lambda entry: (entry["name"], int(entry.get("version", -1))))  # (Triton's order)

    def repository_request_bytes(self, http: bool) -> int:
        """The largest load, unload or index request of the repository extension the front-ends read (`http`: as an
        HTTP body); larger ones are refused before they are parsed."""
        return request_bytes(self.repository, http)

    def repository_control(self) -> RepositoryControl:
        """Where loads and unloads go; Triton's refusal when the server has no model control."""
        if self.repository is None:
            raise no_explicit_control()
        return self.repository

    # ---- metadata ----------------------------------------------------------------------------
    def server_metadata(self) -> dict[str, Any]:
        return {"name": self.server_name, "version": SERVER_VERSION, "extensions": list(self.extensions)}

    def model_ready(self, name: str, version: str = "") -> bool:
        if name in self.failed_models and self.registry.find(name) is None:
            return False
        return self.registry.get(name, version).ready and self.accepting

    def model_readiness(self) -> dict[tuple[str, str], bool]:
        """(name, version) -> ready, as the model ready endpoint answers, for every version served or starting and
        every one that failed to load; a version unloaded on request, or never loaded, is not there."""
        readiness = {(m.name, str(m.version)): m.ready and self.accepting for m in self.registry}
        for entry in self.repository_index(ready_only=False):
            version = entry.get("version", "-1")
            if version != "-1" and entry.get("state") != "READY" and entry.get("reason") != "unloaded":
                readiness.setdefault((entry["name"], version), False)
        return readiness

    def model_metadata(self, name: str, version: str = "") -> dict[str, Any]:
        return self.registry.metadata(name, version)

    def model_config(self, name: str, version: str = "") -> dict[str, Any]:
        return self.registry.get(name, version).config.as_triton_shows()

    def statistics(self, name: str = "", version: str = "") -> list[dict[str, Any]]:
        """Triton's: every ready model version; every version of `name`; or the one `version` of it."""
        if not name:
            return [m.stats.to_dict(m.name, str(m.version)) for m in self.registry if m.ready]
        models = self.registry.versions(name)
        if not models:
            raise invalid_arg(f"requested model '{name}' is not available")
        if version:
            try:
                models = [self.registry.get(name, version)]
            except ServerError:
                raise invalid_arg(f"requested model version is not available for model '{name}'") from None
        return [m.stats.to_dict(m.name, str(m.version)) for m in models]

    # ---- inference ---------------------------------------------------------------------------
    def begin(self, request: InferRequest, model: Model | None = None, internal: bool = False, cache: bool = True
              ) -> Call:  # fmt: skip
        """Begin one unary inference, the one way every route and every caller begins one: the request is validated and
        submitted now (raising what is wrong with it), and the `Call` returned owns its settlement, response and
        statistics. `model`: what `registry.get(request.model_name, request.model_version)` answered the caller just now
        (one look-up per request); `internal`: a step of an ensemble (it runs while the server drains); `cache`: through
        the model's response cache, where it has one. The variants are the call's: a model with a response cache, or an
        ensemble, is answered by a coroutine of the core (`RunCall`); any other by its model's scheduler, one job
        (`UnaryCall`), whose sequence (the scheduler's) and BLS chain (`submit`) go with it. A request with a `trace`
        is stamped on the way."""
        if model is None:
            model = self.registry.get(request.model_name, request.model_version)
        if len(request.outputs) > 1:  # (before the cache's key and an ensemble's outputs are taken from them)
            drop_repeated_outputs(request.outputs)
        if cache and model.cache is not None:
            return RunCall(infer_cached(self, model, model.cache, request, internal))
        if model.ensemble is not None:
            return RunCall(infer_ensemble(self, model, request, internal))
        start = time.perf_counter_ns()
        model, job = self.submit(request, False, internal, model, start)
        return UnaryCall(model, job, request, start)

    async def infer(self, request: InferRequest, model: Model | None = None) -> InferResponse:
        """`begin` and await the call: the response, whose buffers the caller must release (`answer` written out: one
        coroutine frame per request fewer)."""
        call = self.begin(request, model)
        try:
            await call.future
        except asyncio.CancelledError:
            call.cancel()
            raise
        except Exception:  # noqa: BLE001 - `result` raises it (settled and counted)
            pass
        return call.result()

    async def infer_with_stats(self, request: InferRequest, internal: bool = False, cache: bool = True,
                               model: Model | None = None) -> tuple[InferResponse, ExecutionStats]:  # fmt: skip
        """`infer`, and what the execution took (arguments as for `begin`; an ensemble's own execution is the sum of its
        steps')."""
        return await answer(self.begin(request, model, internal, cache))

    def submit(self, request: InferRequest, stream: bool, internal: bool = False, model: Model | None = None,
               start: int = 0) -> tuple[Model, Job]:  # fmt: skip
        """Validate the request, resolve its regions and hand it to the model's scheduler as a job (`model`: the
        registry's answer for the request's name and version, when the caller has just looked it up; `start`: when the
        request came, for its trace).

        From here the job owns what the request holds (region references, its place in the in-flight count) and
        releases it when it ends, whatever its caller does."""
        if model is None:
            model = self.registry.get(request.model_name, request.model_version)
        if not self.accepting and not internal:  # (an ensemble's steps still run while the server drains)
            raise unavailable("Server not ready")
        trace = request.trace
        if trace is not None:
            trace.stamp(REQUEST_START, start or time.perf_counter_ns())
        # region errors come first, as before validation (`execution_request` written out: one call fewer)
        execution, regions = execution_request(self.shm, self.received, request)
        signature = None
        if request.layout is not None:
            batch_size, signature = validate_layout(model.config, request, model.layouts)
        else:
            batch_size = validate_request(model.config, request)
            if model.scheduler.batching is not None:
                signature = batch_signature(model.config, request)
        if model.scheduler.batching is None:
            signature = None
        job = Job(execution, batch_size, signature, stream, request.id, self._loop)
        if request.chain:  # a BLS request (or a step of an ensemble one reached): the instance hears its chain
            execution.chain = request.chain
            job.reentry = reentry(model.name, model.version, request.chain)
        if request.parameters:
            job.priority, job.timeout_us = request_queueing(request.parameters)  # (what a queue policy goes by)
        self._in_flight += 1  # (`request_began`)
        self._drained.clear()  # type: ignore[union-attr]  # made in start()
        job.on_finish(self._request_ended)
        try:
            if regions:
                self._submit_with_regions(model, job, execution, regions)
            else:
                model.scheduler.submit(job)
        except BaseException:
            job.finish()
            raise
        if trace is not None:
            trace.model_version = str(model.version)  # the version that runs it (a request may leave it out)
            trace.stamp(QUEUE_START, job.enqueued_ns)
        return model, job

    def _submit_with_regions(self, model: Model, job: Job, execution: ExecutionRequest, regions: list[Region]) -> None:
        """Submit a job that uses client regions (or receive segments): they stay referenced, and its output bytes held
        (`OutputHolds`), until no instance can work on it any more (`Job.on_settled`). It waits outside the scheduler
        (`HELD`) while bytes it reads or writes may still be written by a call whose caller left."""
        self.shm.acquire(regions)
        holds = self.holds
        hold: Hold | None = None

        def settled() -> None:
            if hold is not None:
                holds.release(hold)
            self.shm.release(regions)

        job.on_settled(settled)
        if not execution.output_regions and not holds:  # (nothing written, nothing held: the common input-only call)
            model.scheduler.submit(job)
            return
        hold, waits = holds.admit(job, execution.output_regions.values(), execution.input_regions.values(),
                                  lambda: self._resume(model, job))
        if waits:
            job.state = HELD
            job.enqueued_ns = time.perf_counter_ns()
        else:
            model.scheduler.submit(job)

    @staticmethod
    def _resume(model: Model, job: Job) -> None:
        """A job held back (`HELD`) goes to its model's scheduler, or fails if the model cannot take it any more."""
        if job.state != HELD:  # (withdrawn meanwhile: it has ended)
            return
        job.state = QUEUED
        if not model.loaded:
            job.fail(unavailable(f"model '{model.name}' was unloaded"))
            return
        try:
            model.scheduler.submit(job)
        except ServerError as exc:
            job.fail(exc)

    def request_began(self) -> Callable[[], None]:
        """Count a request in flight (drain waits for it); the function returned ends it."""
        self._in_flight += 1
        self._drained.clear()  # type: ignore[union-attr]  # made in start()
        return self._request_ended

    def _request_ended(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._drained.set()  # type: ignore[union-attr]  # made in start()

    def execution_request(self, request: InferRequest) -> tuple[ExecutionRequest, list[Region]]:
        """The request as an instance executes it: region references checked and resolved."""
        return execution_request(self.shm, self.received, request)

    def infer_stream(self, request: InferRequest, errors_inline: bool = False) -> AsyncGenerator[InferResponse, None]:
        """A decoupled model's responses to one request, as the worker produces them (zero or more). The worker runs
        ahead of what the caller has taken by its window at most: a caller that stops reading stops the model. An
        error response of the model ends the stream with its ServerError; with `errors_inline` it is a response
        whose `error` is set, and the stream goes on to the model's final flag, as Triton's gRPC stream, in-process
        API and BLS hand a decoupled model's error responses on."""
        return stream_responses(self, request, errors_inline)

    # ---- shutdown ----------------------------------------------------------------------------
    async def drain(self, timeout_s: float) -> bool:
        """Stop taking requests and wait up to `timeout_s` for in-flight ones; True if all finished."""
        self.accepting = False
        if self._drained is None:
            return True
        try:
            await asyncio.wait_for(self._drained.wait(), timeout_s)
            return True
        except asyncio.TimeoutError:
            logger.warning("%d request(s) still in flight after %.0f s; stopping anyway", self._in_flight, timeout_s)
            return False

    def cancel_drain(self) -> None:
        """Make a running `drain` return now."""
        if self._drained is not None:
            self._drained.set()

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the instances of every model (their requests in flight fail)."""
        self.accepting = False
        models = [*self.registry, *self._retiring.values()]
        for model in models:
            model.loaded = False
            model.scheduler.fail_all("the server is stopping")
        await asyncio.gather(*(m.source.stop(timeout_s) for m in models), return_exceptions=True)
        self.live = False


__all__ = ["ServerCore", "SERVER_NAME", "SERVER_VERSION"]


def _count_warmup(model: Model, source: InstanceSource) -> None:
    """The warm-up executions the model's instances ran before it was ready count in its statistics, as Triton counts
    them: each request a success (its whole time as compute_infer) and each execution one batch of its requests."""
    for status in source.describe():
        for requests, ns in status.warmup:
            for _ in range(requests):
                model.stats.record_success(1, ns, 0, 0, ns, 0)
            model.stats.record_execution(requests, 0, ns, 0)
