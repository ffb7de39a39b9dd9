"""What a Ray Serve replica runs, without Ray: an in-process `tritonserver.Server` and pytriton's own HTTP and gRPC
request handling on that server's event loop.

`ReplicaServer` takes requests as plain values (an HTTP request's method, path, headers and body; a gRPC method name
and the request message's bytes; numpy inputs) from whatever loop the replica runs, runs them on the server's loop
(the core is not thread-safe) and answers plain values too, so that nothing but bytes, tuples and numpy arrays
crosses Ray's serialisation.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import grpc
import numpy

from pytriton.frontend.access import AccessPolicy
from pytriton.frontend.grpc.servicer import InferenceServicer
from pytriton.frontend.grpc.wire import _STREAM_RESPONSE_TAG as STREAM_RESPONSE_TAG
from pytriton.frontend.grpc.wire import InferResponseWire, StreamResponseWire, encode_varint, parse_infer_request
from pytriton.frontend.http.app import HttpApp
from pytriton.frontend.http1 import HttpRequest, error_response
from pytriton.model_config.model_config import ModelConfig
from pytriton.model_config.tensor import Tensor as TensorSpec
from pytriton.ray._protos import service_pb2 as pb
from pytriton.server.bound_model import BoundModel
from pytriton.tritonserver import DataType, Server, Tensor, UnavailableError

logger = logging.getLogger("pytriton.ray")

T = TypeVar("T")

NOT_BEHIND_SERVE = "is not available behind Ray Serve"
# Routes of the HTTP API that act on one server's local state (shared memory of its host, its repository): behind
# Serve a request reaches any replica, so they are refused with this status and a message that says why.
HTTP_LOCAL_ROUTES = {
    "systemsharedmemory": "system shared memory",
    "cudasharedmemory": "CUDA shared memory",
    "repository": "model repository control",
    "pytriton": "connecting to the server's workers",
}
HTTP_LOCAL_STATUS = 501
GRPC_LOCAL_METHODS = {
    "SystemSharedMemoryStatus": "system shared memory", "SystemSharedMemoryRegister": "system shared memory",
    "SystemSharedMemoryUnregister": "system shared memory", "CudaSharedMemoryStatus": "CUDA shared memory",
    "CudaSharedMemoryRegister": "CUDA shared memory", "CudaSharedMemoryUnregister": "CUDA shared memory",
    "RepositoryIndex": "model repository control", "RepositoryModelLoad": "model repository control",
    "RepositoryModelUnload": "model repository control",
}
GRPC_UNARY_METHODS = (
    "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelConfig", "ModelStatistics",
    "ModelInfer", "TraceSetting", "LogSettings",
)
READY_TIMEOUT_S = 120.0


def local_route(path: str) -> str | None:
    """What an HTTP path reaches that only exists on one server (None for the routes served behind Serve)."""
    parts = path.split("/")
    if len(parts) >= 3 and parts[1] == "v2":
        return HTTP_LOCAL_ROUTES.get(parts[2])
    return None


def not_available(what: str) -> str:
    return (f"{what} {NOT_BEHIND_SERVE}: each request may reach another replica (send tensors in the request body; "
            "models are loaded by the deployment)")


def grpc_code_number(code: grpc.StatusCode) -> int:
    return int(code.value[0])


class _CallContext:
    """The servicer's view of a gRPC call (metadata, peer, abort) for a call the Serve proxy forwarded."""

    def __init__(self, metadata: Sequence[tuple[str, str]], peer: str):
        self._metadata = list(metadata)
        self._peer = peer
        self.code = grpc.StatusCode.OK
        self.details = ""

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        self.code, self.details = code, details
        raise _Aborted()


class _Aborted(Exception):
    """The servicer ended the call with a status (kept on the context)."""


class CallableModel:
    """A PyTriton callable with the arguments of `Triton.bind` (picklable: the replica binds it)."""

    def __init__(self, model_name: str, infer_func: Callable[..., Any] | Sequence[Callable[..., Any]] | str,
                 inputs: Sequence[TensorSpec],
                 outputs: Sequence[TensorSpec], model_version: int = 1, config: ModelConfig | None = None,
                 strict: bool = False):
        self.model_name = model_name
        self.infer_func = infer_func
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.model_version = model_version
        self.config = config or ModelConfig()
        self.strict = strict

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        func = state["infer_func"]
        if not isinstance(func, str):
            funcs = [func] if callable(func) else list(func)
            state["infer_func"] = ([_by_name(f) for f in funcs], callable(func))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        func = state["infer_func"]
        if isinstance(func, tuple):
            funcs = [_from_name(f) for f in func[0]]
            state["infer_func"] = funcs[0] if func[1] else funcs
        self.__dict__.update(state)

    def bound(self) -> BoundModel:
        return BoundModel(self.model_name, self.infer_func, self.inputs, self.outputs, self.model_version,
                          self.config, self.strict)


def _by_name(func: Callable[..., Any]) -> Any:
    """A module-level function as its import name (decorated callables, wrapt proxies, cannot be pickled), anything
    else as itself (Ray's cloudpickle sends closures by value)."""
    module, name = getattr(func, "__module__", None), getattr(func, "__qualname__", None)
    if module and name and "<" not in name:
        found: Any = sys.modules.get(module)
        for part in name.split("."):
            found = getattr(found, part, None)
        if found is func:
            return ("pytriton.ray:by-name", module, name)
    return func


def _from_name(ref: Any) -> Any:
    if isinstance(ref, tuple) and len(ref) == 3 and ref[0] == "pytriton.ray:by-name":
        found: Any = importlib.import_module(ref[1])
        for part in ref[2].split("."):
            found = getattr(found, part)
        return found
    return ref


class ReplicaServer:
    """An in-process server serving a model repository and/or PyTriton callables, with Triton's HTTP and gRPC
    request handling over it."""

    def __init__(self, model_repository: str | None = None, models: Sequence[CallableModel] = (),
                 server_options: dict[str, Any] | None = None):
        if model_repository is None and not models:
            raise ValueError("a Triton deployment needs a model_repository or at least one model (CallableModel)")
        self._scratch: str | None = None
        if model_repository is None:  # the in-process server needs a repository: an empty one of ours
            self._scratch = model_repository = tempfile.mkdtemp(prefix="pytriton-ray-")
        options = {"model_repository": model_repository, **(server_options or {})}
        self.server = Server(**options)
        self._bound: list[BoundModel] = []
        self._expected: set[str] = set()
        try:
            self.server.start(wait_until_ready=True, timeout=READY_TIMEOUT_S)
            self._remove_scratch()  # read once at start (model control mode NONE): a killed replica leaves nothing
            runtime = self.server._started()
            self.loop = runtime.loop
            process = runtime.process
            core = process.core
            assert core is not None
            self.http_app = HttpApp(core, process.log_settings, process.trace_settings,
                                    max_input_bytes=process.config.http_limits.max_input_bytes,
                                    access=AccessPolicy(), tracer=process.tracer)
            self.servicer = InferenceServicer(core, process.log_settings, process.trace_settings,
                                              tracer=process.tracer)
            for model in models:
                self._bind(model.bound())
            self._expected = set(self.model_names())  # a model gone later makes the replica unhealthy
        except BaseException:
            self.stop()
            raise

    def _bind(self, model: BoundModel) -> None:
        runtime = self.server._started()
        control = runtime.process.control
        assert control is not None
        reply: Any = runtime.call(control.handle(model.load_request(READY_TIMEOUT_S)))  # a LoadReply
        if model.target is None:
            model.start_hosts(reply)
        self._bound.append(model)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.server.model(model.name).ready():
            if not model.hosts_alive():
                raise RuntimeError(f"model '{model.name}' failed to start: its inference callable could not be set "
                                   "up (see the log above)")
            if time.monotonic() > deadline:
                raise TimeoutError(f"model '{model.name}' did not become ready within {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop the server (its workers exit, its shared memory goes) and the threads hosting callables."""
        try:
            self.server.stop()
        finally:
            for model in self._bound:
                model.stop_hosts()
            self._bound = []
            self._remove_scratch()

    def _remove_scratch(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    # ---- the server's loop -------------------------------------------------------------------------
    async def _on_loop(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the server's loop and wait for it from the caller's loop."""
        if self.loop.is_closed():
            coroutine.close()
            raise UnavailableError("Server not started")
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))

    # ---- health ------------------------------------------------------------------------------------
    def ready(self) -> tuple[bool, str]:
        """Whether the server and each of its models (those it started with included) is ready, and if not, what."""
        if not self.server.ready():
            return False, "the server is not ready"
        models = self.server.models()
        not_ready = [name for (name, _), model in models.items() if not model.ready()]
        not_ready += [name for name in self._expected if name not in {n for n, _ in models}]
        if not_ready:
            return False, f"model(s) not ready: {', '.join(sorted(set(not_ready)))}"
        return True, ""

    def metrics(self) -> str:
        return self.server.metrics()

    def model_names(self) -> list[str]:
        return sorted({name for name, _ in self.server.models()})

    # ---- HTTP --------------------------------------------------------------------------------------
    async def http(self, method: str, path: str, query: str, headers: Sequence[tuple[str, str]], body: bytes,
                   peer: str | None) -> tuple[int, list[tuple[str, str]], bytes]:
        """One request of Triton's HTTP API: (status, headers, body)."""
        what = local_route(path)
        if what is not None:
            response = error_response(HTTP_LOCAL_STATUS, not_available(what))
            return response.status, response.headers, b"".join(response.parts)
        joined: dict[str, str] = {}
        for name, value in headers:
            name = name.lower()
            joined[name] = f"{joined[name]}, {value}" if name in joined else value
        request = HttpRequest(method, path, query, joined, body, peer)

        async def handle() -> tuple[int, list[tuple[str, str]], bytes]:
            response = await self.http_app.handle(request)
            try:
                parts = list(response.parts)
                if response.stream is not None:  # (generate_stream: the whole stream, once the model finished)
                    try:
                        parts += [part async for part in response.stream]
                    finally:
                        await response.stream.aclose()
                data = b"".join(bytes(p) if isinstance(p, memoryview) else p for p in parts)
            finally:
                if response.on_sent is not None:
                    response.on_sent()
            return response.status, list(response.headers), data

        return await self._on_loop(handle())

    # ---- gRPC --------------------------------------------------------------------------------------
    async def grpc(self, method: str, request: bytes, metadata: Sequence[tuple[str, str]], peer: str
                   ) -> tuple[int, str, bytes]:  # fmt: skip
        """One unary call of Triton's gRPC service: (status code number, details, response message bytes)."""
        what = GRPC_LOCAL_METHODS.get(method)
        if what is not None:
            return grpc_code_number(grpc.StatusCode.UNAVAILABLE), not_available(what), b""
        if method not in GRPC_UNARY_METHODS:
            return grpc_code_number(grpc.StatusCode.UNIMPLEMENTED), f"{method} is not served behind Ray Serve", b""
        context = _CallContext(metadata, peer)

        async def handle() -> tuple[int, str, bytes]:
            try:
                message = parse_infer_request(request) if method == "ModelInfer" else \
                    getattr(pb, f"{method}Request").FromString(request)
                response = await getattr(self.servicer, method)(message, context)
            except _Aborted:
                return grpc_code_number(context.code), context.details, b""
            if isinstance(response, InferResponseWire):
                try:
                    data = b"".join(bytes(p) if isinstance(p, memoryview) else p for p in response.chunks())
                finally:
                    if response.on_sent is not None:
                        response.on_sent()
                return 0, "", data
            return 0, "", response.SerializeToString()

        return await self._on_loop(handle())

    async def grpc_stream(self, request: bytes, metadata: Sequence[tuple[str, str]], peer: str
                          ) -> AsyncIterator[tuple[int, str, bytes]]:  # fmt: skip
        """One request of a ModelStreamInfer stream: its stream responses' bytes as the model sends them (a decoupled
        model's several ones), each as (0, "", bytes); a status that ends the stream as (code, details, b"")."""
        caller = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[int, str, bytes] | None] = asyncio.Queue()
        context = _CallContext(metadata, peer)

        def put(item: tuple[int, str, bytes] | None) -> None:
            caller.call_soon_threadsafe(queue.put_nowait, item)

        async def requests() -> AsyncIterator[Any]:
            yield parse_infer_request(request)

        async def run() -> None:
            try:
                async for item in self.servicer.ModelStreamInfer(requests(), context):
                    put((0, "", _stream_bytes(item)))
            except _Aborted:
                put((grpc_code_number(context.code), context.details, b""))
            except Exception as exc:  # noqa: BLE001 - the stream ends with it
                put((grpc_code_number(grpc.StatusCode.INTERNAL), f"{type(exc).__name__}: {exc}", b""))
            finally:
                put(None)

        future = asyncio.run_coroutine_threadsafe(run(), self.loop)
        try:
            while (item := await queue.get()) is not None:
                yield item
        finally:
            future.cancel()

    # ---- numpy in, numpy out -----------------------------------------------------------------------
    async def infer(self, inputs: dict[str, Any], model_name: str | None = None, model_version: int = -1,
                    parameters: dict[str, Any] | None = None) -> dict[str, numpy.ndarray]:
        """Infer with numpy (or DLPack) inputs; the outputs of the (last) response as numpy arrays of their own."""
        if model_name is None:
            names = self.model_names()
            if len(names) != 1:
                raise ValueError(f"model_name is needed: this deployment serves {len(names)} models ({names})")
            model_name = names[0]
        model = self.server.model(model_name, model_version)
        outputs: dict[str, numpy.ndarray] = {}
        async for response in model.async_infer(inputs=inputs, parameters=parameters or {}):
            outputs.update({name: _to_numpy(tensor) for name, tensor in response.outputs.items()})
        return outputs


def _stream_bytes(item: Any) -> bytes:
    """A ModelStreamInferResponse's bytes; the output buffers of one that carries them go back now."""
    if isinstance(item, StreamResponseWire):
        wire = item.response
        try:
            data = b"".join(bytes(p) if isinstance(p, memoryview) else p for p in wire.chunks())
        finally:
            if wire.on_sent is not None:
                wire.on_sent()
        return STREAM_RESPONSE_TAG + encode_varint(len(data)) + data
    return bytes(item.SerializeToString())


def _to_numpy(tensor: Tensor) -> numpy.ndarray:
    if tensor.data_type == DataType.BYTES:
        return tensor.to_bytes_array()
    return numpy.array(tensor, copy=True)  # a copy of our own: the response's shared memory goes back now


__all__ = ["CallableModel", "ReplicaServer", "local_route", "not_available"]
