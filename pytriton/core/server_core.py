"""The protocol-free heart of the server: models, their lifecycle, inference and statistics.

Front-ends convert wire formats into `InferRequest`s and call `infer`; every error comes out as a
`ServerError` with a Triton status, which each front-end maps to its own codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, AsyncIterator, Iterator

from pytriton.core.classification import classify
from pytriton.core.registry import Model, ModelRegistry
from pytriton.core.shm_registry import CudaShmRegion, Region, SharedMemoryRegistry
from pytriton.core.types import InferRequest, InferResponse
from pytriton.core.validation import validate_request
from pytriton.exceptions import ServerError, Status, internal, invalid_arg, unavailable
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.arena import ArenaExhaustedError
from pytriton.proxy.messages import ExecutionResult, RequestData, TensorData
from pytriton.proxy.router import ProxyRouter, WorkerGoneError, WorkerLink
from pytriton.scheduler.dispatcher import InstanceDispatcher
from pytriton.supervisor.external import ExternalInstances
from pytriton.supervisor.worker_pool import WorkerPool

logger = logging.getLogger("pytriton.core")

SERVER_NAME = "triton"
# The Triton release whose protocol this server follows (tritonclient 2.73.0).
SERVER_VERSION = "2.73.0"


class ServerCore:
    """Owns the model registry, the worker transport and the in-flight request count."""

    def __init__(
        self,
        run_dir: str,
        tag: str,
        inline_max: int,
        log_level: str = "INFO",
        allow_client_shm: bool = True,
        gpu_available: bool = False,
    ):
        self.run_dir = run_dir
        self.tag = tag
        self.inline_max = inline_max
        self.log_level = log_level
        self.registry = ModelRegistry()
        self.extensions: list[str] = [
            "classification",
            "model_configuration",
            "system_shared_memory",
            "cuda_shared_memory",
            "parameters",
            "statistics",
        ]
        self.shm = SharedMemoryRegistry(lambda: gpu_available, allow_client_shm)
        self.shm.on_removed.append(self._region_removed)
        self.router: ProxyRouter | None = None
        self.live = False
        self.accepting = False
        self._in_flight = 0
        self._drained: asyncio.Event | None = None
        self._generation = 0
        self._background: set[asyncio.Future] = set()

    async def start(self) -> None:
        self.router = ProxyRouter(f"ipc://{self.run_dir}/workers.sock", self.tag, self.inline_max)
        self._drained = asyncio.Event()
        self._drained.set()
        self.live = True
        self.accepting = True

    def _region_removed(self, region: Region) -> None:
        if self.router is not None:
            self.router.broadcast_unmap([region.id])

    @property
    def ready(self) -> bool:
        return self.live and self.accepting and all(m.ready for m in self.registry)

    # ---- models ------------------------------------------------------------------------------
    async def add_model(self, config: TritonModelConfig, callable_target: str) -> Model:
        """Start the workers of a model and register it once they are all up."""
        assert self.router is not None, "start() first"
        dispatcher = InstanceDispatcher(config.model_name, self.router, config.max_batch_size, config.batcher)
        pool = WorkerPool(
            self.router,
            config,
            callable_target,
            on_ready=dispatcher.add_instance,
            on_lost=dispatcher.remove_instance,
            on_broken=dispatcher.fail_waiters,
            log_level=self.log_level,
        )
        model = Model(config=config, dispatcher=dispatcher, pool=pool)
        await pool.start()
        self.registry.add(model)
        model.ready = True
        logger.info(
            "model '%s' version %d ready (%d instance(s), max_batch_size %d)",
            config.model_name,
            config.model_version,
            len(pool.instances),
            config.max_batch_size,
        )
        return model

    async def add_external_model(self, config: TritonModelConfig, timeout_s: float = 300.0) -> list[str]:
        """Register a model whose instances a client process hosts; return the identities they connect with.

        The model becomes ready once every instance has connected (within `timeout_s`).
        """
        assert self.router is not None, "start() first"
        self._generation += 1
        dispatcher = InstanceDispatcher(config.model_name, self.router, config.max_batch_size, config.batcher)
        pool = ExternalInstances(
            self.router, config, self._generation, on_ready=dispatcher.add_instance, on_lost=dispatcher.remove_instance
        )
        model = Model(config=config, dispatcher=dispatcher, pool=pool)  # type: ignore[arg-type]
        identities = pool.start()
        self.registry.add(model)

        async def become_ready() -> None:
            try:
                await pool.wait_ready(timeout_s)
            except Exception as exc:  # noqa: BLE001
                logger.error("model '%s' did not become ready: %s", config.model_name, exc or type(exc).__name__)
                dispatcher.fail_waiters(f"model '{config.model_name}' is not available: {exc}")
                return
            model.ready = True
            logger.info("model '%s' version %d ready (%d instance(s) hosted by pid %s)", config.model_name,
                        config.model_version, len(pool.instances), pool.instances[0].link.pid)

        task = asyncio.ensure_future(become_ready())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return identities

    async def unload_model(self, name: str) -> None:
        """Stop serving a model: it leaves the registry, then its instances stop."""
        model = self.registry.remove(name)
        if model is None:
            return
        model.ready = False
        await model.pool.stop()
        logger.info("model '%s' unloaded", name)

    # ---- metadata ----------------------------------------------------------------------------
    def server_metadata(self) -> dict[str, Any]:
        return {"name": SERVER_NAME, "version": SERVER_VERSION, "extensions": list(self.extensions)}

    def model_ready(self, name: str, version: str = "") -> bool:
        return self.registry.get(name, version).ready and self.accepting

    def model_metadata(self, name: str, version: str = "") -> dict[str, Any]:
        model = self.registry.get(name, version)
        config = model.config
        lead = [-1] if config.max_batch_size > 0 else []

        def tensors(specs):
            return [{"name": s.name, "datatype": s.datatype, "shape": lead + list(s.shape)} for s in specs]

        return {
            "name": config.model_name,
            "versions": [str(config.model_version)],
            "platform": "python",
            "inputs": tensors(config.inputs),
            "outputs": tensors(config.outputs),
        }

    def model_config(self, name: str, version: str = "") -> dict[str, Any]:
        return self.registry.get(name, version).config.to_triton_dict()

    def statistics(self, name: str = "", version: str = "") -> list[dict[str, Any]]:
        if not name:
            return [m.stats.to_dict(m.name, str(m.version)) for m in self.registry if m.ready]
        try:
            model = self.registry.get(name)
        except ServerError:
            raise invalid_arg(f"requested model '{name}' is not available") from None
        if version and version != str(model.version):
            raise invalid_arg(f"requested model version is not available for model '{name}'")
        return [model.stats.to_dict(model.name, str(model.version))]

    # ---- inference ---------------------------------------------------------------------------
    def _prepare(self, request: InferRequest) -> tuple[Model, int, RequestData, list[Region]]:
        model = self.registry.get(request.model_name, request.model_version)
        if not self.accepting:
            raise unavailable("Server not ready")
        regions: list[Region] = []
        inputs = request.inputs
        output_regions: list[TensorData] = []
        if any(t.data is None for t in inputs) or any(o.parameters for o in request.outputs):
            inputs, output_regions, regions = self._resolve_regions(request)
        batch_size = validate_request(model.config, request)
        item = RequestData(
            inputs=inputs,
            requested_outputs=[o.name for o in request.outputs],
            parameters=request.parameters,
            output_regions=output_regions,
        )
        return model, batch_size, item, regions

    def _response(self, model: Model, request: InferRequest, result: ExecutionResult, link: WorkerLink) -> InferResponse:
        """The client's response for one worker result (or the error it carries); records the execution."""
        if result.error or not result.responses:
            result.release_buffers()
            error = result.error or "no response from the worker"
            raise internal(f"Failed to process the request(s) for model '{link.label}', message: {error}")
        if result.responses[0].error:  # the model's own answer for this request (e.g. output region too small)
            result.release_buffers()
            raise internal(result.responses[0].error)
        response = result.responses[0]
        outputs = response.outputs
        if any("classification" in o.parameters for o in request.outputs):
            try:
                outputs = self._classify(model, request, outputs)
            except BaseException:
                result.release_buffers()
                raise
        return InferResponse(
            model_name=model.name,
            model_version=str(model.version),
            id=request.id,
            outputs=outputs,
            parameters=response.parameters,
            _release=result.release_buffers,
        )

    @contextlib.contextmanager
    def _in_flight_request(self, model: Model, regions: list[Region], start: int) -> Iterator[None]:
        """Counts the request for draining, holds its regions, and records a failure if it raises."""
        self.shm.acquire(regions)
        self._in_flight += 1
        self._drained.clear()  # type: ignore[union-attr]
        try:
            yield
        except WorkerGoneError as exc:
            model.stats.record_failure(time.perf_counter_ns() - start)
            raise unavailable(str(exc)) from None
        except ArenaExhaustedError as exc:
            model.stats.record_failure(time.perf_counter_ns() - start)
            raise unavailable(f"cannot take the request for model '{model.name}': {exc}") from None
        except ServerError:
            model.stats.record_failure(time.perf_counter_ns() - start)
            raise
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as exc:  # a bug of ours must become a clear error, not a dropped call
            logger.exception("inference on model '%s' failed", model.name)
            model.stats.record_failure(time.perf_counter_ns() - start)
            raise ServerError(Status.INTERNAL, f"internal error while running model '{model.name}': {exc}") from exc
        finally:
            self.shm.release(regions)
            self._in_flight -= 1
            if self._in_flight == 0:
                self._drained.set()  # type: ignore[union-attr]

    async def infer(self, request: InferRequest) -> InferResponse:
        """Validate, schedule and execute one request; the response's buffers must be released by the caller."""
        start = time.perf_counter_ns()
        model, batch_size, item, regions = self._prepare(request)
        with self._in_flight_request(model, regions, start):
            result, queue_ns, link = await model.dispatcher.execute([item], batch_size)
            response = self._response(model, request, result, link)
            stats = model.stats
            if result.first_of_execution:
                stats.record_execution(result.execution_batch_size or batch_size, result.compute_input_ns,
                                       result.compute_infer_ns, result.compute_output_ns)
            stats.record_success(batch_size, time.perf_counter_ns() - start, queue_ns, result.compute_input_ns,
                                 result.compute_infer_ns, result.compute_output_ns)
            return response

    async def infer_stream(self, request: InferRequest) -> AsyncIterator[InferResponse]:
        """A decoupled model's responses to one request, as the worker produces them (zero or more)."""
        start = time.perf_counter_ns()
        model, batch_size, item, regions = self._prepare(request)
        with self._in_flight_request(model, regions, start):
            compute = [0, 0, 0]
            queue_ns = 0
            async for result, queue_ns, link in model.dispatcher.execute_stream([item]):
                response = self._response(model, request, result, link)
                compute[0] += result.compute_input_ns
                compute[1] += result.compute_infer_ns
                compute[2] += result.compute_output_ns
                yield response
            model.stats.record_execution(batch_size, *compute)
            model.stats.record_success(batch_size, time.perf_counter_ns() - start, queue_ns, *compute)

    def _resolve_regions(self, request: InferRequest) -> tuple[list[TensorData], list[TensorData], list[Region]]:
        """Turn region references (name, relative offset) into what a worker maps; check their bounds."""
        regions: list[Region] = []
        inputs = []
        for tensor in request.inputs:
            if tensor.data is not None:
                inputs.append(tensor)
                continue
            region = self.shm.lookup(tensor.region, tensor.offset, tensor.nbytes)
            regions.append(region)
            inputs.append(_transport_ref(tensor.name, tensor.datatype, tensor.shape, region, tensor.offset,
                                         tensor.nbytes))
        outputs = []
        for output in request.outputs:
            name = output.parameters.get("shared_memory_region")
            if name is None:
                continue
            offset = int(output.parameters.get("shared_memory_offset", 0))
            size = int(output.parameters["shared_memory_byte_size"])
            region = self.shm.lookup(name, offset, size)
            regions.append(region)
            outputs.append(_transport_ref(output.name, "", (), region, offset, size))
        return inputs, outputs, regions

    @staticmethod
    def _classify(model: Model, request: InferRequest, outputs: list) -> list:
        counts = {o.name: int(o.parameters["classification"]) for o in request.outputs if "classification" in o.parameters}
        return [classify(t, counts[t.name], model.config.batching) if t.name in counts else t for t in outputs]

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
        """Stop the workers of every model and release the transport."""
        self.accepting = False
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*(m.pool.stop(timeout_s) for m in self.registry), return_exceptions=True)
        for model in self.registry:
            model.ready = False
        if self.router is not None:
            self.router.close()
        self.live = False


def _transport_ref(
    name: str, datatype: str, shape: tuple[int, ...], region: Region, offset: int, nbytes: int
) -> TensorData:
    if isinstance(region, CudaShmRegion):
        return TensorData(name, datatype, shape, None, "", region.byte_size, offset, nbytes, region.id,
                          region.raw_handle, region.device_id)
    return TensorData(name, datatype, shape, None, region.key, region.offset + region.byte_size,
                      region.offset + offset, nbytes, region.id)


__all__ = ["ServerCore", "SERVER_NAME", "SERVER_VERSION"]
