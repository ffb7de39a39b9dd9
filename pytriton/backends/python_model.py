"""Runs a Triton Python-backend model (`model.py` with `class TritonPythonModel`) inside a worker, behind the same
worker loop as a callable: `initialize(args)` once, `execute(requests)` per batch, `finalize()` on stop.

A worker is told to run one with the target `python-backend:/path/to/<model>/<version>/model.py`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import inspect
import json
import os
import queue
import sys
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from pytriton.backends import pb_utils
from pytriton.backends.callable_backend import (
    CallableBackend,
    CheckedResponse,
    FinalResponses,
    InferenceCallableError,
    _shape_matches,
)
from pytriton.backends.target import exec_file_module
from pytriton.model_config.datatypes import numpy_to_triton
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.types import Request

PYTHON_MODEL_PREFIX = "python-backend:"
PB_UTILS_MODULE = "triton_python_backend_utils"
CLOSE_WAIT_S = 5.0  # how long closing waits for a decoupled execute() still running (e.g. one that was cancelled)


def python_model_target(model_file: str) -> str:
    """The worker target of the model file `<model>/<version>/<file>.py`."""
    return PYTHON_MODEL_PREFIX + os.path.abspath(model_file)


def is_python_model_target(target: str | None) -> bool:
    return target is not None and target.startswith(PYTHON_MODEL_PREFIX)


def _import_model_file(path: str, model_name: str, version: str) -> Any:
    """Import `model.py` under a name of its own, with its version folder on sys.path (as Triton's stub does)."""
    sys.modules.setdefault(PB_UTILS_MODULE, pb_utils)
    return exec_file_module(path, f"_pytriton_repository_model_{model_name}_{version}")


class PythonModelBackend(CallableBackend):
    """A `TritonPythonModel` instance as the worker loop's backend: requests become `pb_utils.InferenceRequest`s, its
    `InferenceResponse`s become outputs (or per-request errors)."""

    def __init__(self, target: str, config: TritonModelConfig, instance: int = 0):
        path = target[len(PYTHON_MODEL_PREFIX):]
        version_dir = os.path.dirname(path)
        model_dir = os.path.dirname(version_dir)
        version = os.path.basename(version_dir)
        module = _import_model_file(path, config.model_name, version)
        model_class = getattr(module, "TritonPythonModel", None)
        if model_class is None:
            raise AttributeError(f"'{path}' defines no class TritonPythonModel")
        self.model = model_class()
        gpu = config.gpus[instance // config.instance_count] if config.gpus else None
        self.args = {
            "model_config": json.dumps(config.to_triton_dict()),
            "model_instance_kind": "GPU" if gpu is not None else "CPU",
            "model_instance_name": (f"{config.model_name}_{gpu}_{instance % config.instance_count}" if gpu is not None
                                    else f"{config.model_name}_0_{instance}"),
            "model_instance_device_id": str(gpu if gpu is not None else 0),
            "model_repository": model_dir,
            "model_version": version,
            "model_name": config.model_name,
        }
        # Set by the worker for each execution: whether the client of request i (of those that run) left.
        self.cancel_probe: Callable[[int], bool] | None = None
        self._execute_thread: concurrent.futures.ThreadPoolExecutor | None = None  # decoupled models' execute()
        self._executed: concurrent.futures.Future | None = None
        if hasattr(self.model, "initialize"):
            self.model.initialize(self.args)
        super().__init__(self._run, config)

    def _requests(self, requests: list[Request], senders: list[pb_utils.InferenceResponseSender | None]
                  ) -> list[pb_utils.InferenceRequest]:
        probe = self.cancel_probe
        return [
            pb_utils.InferenceRequest._received(
                [pb_utils.Tensor(name, array) for name, array in request.data.items()],
                list(request.requested_output_names or []), dict(request.parameters), sender,
                (request.request_id, request.correlation_id, request.flags),
                None if probe is None else functools.partial(probe, index))
            for index, (request, sender) in enumerate(zip(requests, senders))
        ]

    def _run(self, requests: list[Request]) -> Any:
        if self.config.decoupled:
            return self._stream(requests)
        responses = self.model.execute(self._requests(requests, [None] * len(requests)))
        if inspect.isawaitable(responses):  # `async def execute` (its BLS calls may use async_exec)
            responses = self._loop_for().run_until_complete(responses)
        name = self.config.model_name
        if not isinstance(responses, (list, tuple)):
            raise InferenceCallableError(f"execute() of model '{name}' must return a list of pb_utils."
                                         f"InferenceResponse (one per request), got {type(responses).__name__}")
        if len(responses) != len(requests):
            raise InferenceCallableError(f"execute() of model '{name}' returned {len(responses)} responses for "
                                         f"{len(requests)} requests")
        return list(responses)

    def _stream(self, requests: list[Request]) -> Generator[list[Any], None, None]:
        """A decoupled model: each response a sender sends (during `execute` or later, from any thread) is yielded
        as it is sent, until the request's sender has sent the final flag; a response sent with the flag is yielded
        as `FinalResponses`.

        `execute` runs on the backend's execute thread (one for the life of the instance, so thread-local state
        carries over between calls, as on the stub's main thread) while the worker sends what it yields: the model
        may check `is_cancelled()` between two sends. The next execution waits until this `execute` has returned."""
        name = self.config.model_name
        if len(requests) != 1:
            raise InferenceCallableError(f"decoupled model '{name}' got {len(requests)} requests in one execution")
        sent: queue.SimpleQueue[tuple[int, pb_utils.InferenceResponse | None, int] | BaseException | None] = (
            queue.SimpleQueue())
        senders: list[pb_utils.InferenceResponseSender | None] = [
            pb_utils.InferenceResponseSender(i, lambda index, response, flags: sent.put((index, response, flags)))
            for i in range(len(requests))]
        pb_requests = self._requests(requests, senders)
        self._wait_executed()
        self._executed = self._executor().submit(self._execute_decoupled, pb_requests, sent)
        while True:
            item = sent.get()
            if item is None:  # execute returned (its responses may still come from its threads)
                continue
            if isinstance(item, BaseException):
                raise item
            _, response, flags = item
            final = bool(flags & pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            if response is not None:
                yield FinalResponses([response]) if final else [response]
            if final:
                return

    def _execute_decoupled(self, requests: list[pb_utils.InferenceRequest], sent: queue.SimpleQueue) -> None:
        """(Execute thread) run `execute`; its error, or None once it returned, follows what it sent."""
        try:
            result = self.model.execute(requests)
            if inspect.isawaitable(result):  # `async def execute`: run to completion on this thread's loop
                result = self._loop_for().run_until_complete(result)
            if result is not None:
                raise InferenceCallableError(
                    f"execute() of decoupled model '{self.config.model_name}' must return None (its responses go "
                    f"through the response sender), got {type(result).__name__}")
            sent.put(None)
        except BaseException as exc:  # noqa: BLE001 - the worker loop answers the call with it (or ends)
            sent.put(exc)

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._execute_thread is None:
            self._execute_thread = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix=f"execute-{self.config.model_name}")
        return self._execute_thread

    def _wait_executed(self, timeout_s: float | None = None) -> None:
        """Wait until the previous decoupled `execute` returned (a cancelled stream may still be running it)."""
        executed, self._executed = self._executed, None
        if executed is not None:
            concurrent.futures.wait([executed], timeout_s)

    def check_outputs(self, requests: list[Request], responses: Any) -> list[CheckedResponse]:
        """Each `InferenceResponse` as (outputs, error, parameters): an error fails only its own request."""
        return [self._check(request, response) for request, response in zip(requests, responses)]

    def _check(self, request: Request, response: Any) -> CheckedResponse:
        name = self.config.model_name
        if not isinstance(response, pb_utils.InferenceResponse):
            raise InferenceCallableError(f"model '{name}' must answer with pb_utils.InferenceResponse, got "
                                         f"{type(response).__name__}")
        error = response.error()
        if error is not None:
            return [], error.message() or "the model returned an error", {}
        requested = request.requested_output_names
        outputs = []
        for tensor in response.output_tensors():
            output = tensor.name()
            if requested and output not in requested:
                continue
            spec = self.config.output_by_name.get(output)
            if spec is None:
                raise InferenceCallableError(f"model '{name}' returned output '{output}', which its config.pbtxt "
                                             f"does not declare (declared: {sorted(self.config.output_by_name)})")
            array = tensor.as_numpy()
            datatype = numpy_to_triton(array.dtype) if isinstance(array, np.ndarray) else "?"
            if datatype != spec.datatype:
                raise InferenceCallableError(f"output '{output}' of model '{name}' has datatype {datatype} (numpy "
                                             f"{array.dtype}), but its config.pbtxt declares {spec.datatype}")
            if not _shape_matches(spec, array.shape, self.config.batching):
                expected = ([-1] if self.config.batching else []) + list(spec.shape)
                raise InferenceCallableError(f"output '{output}' of model '{name}' has shape {list(array.shape)}, "
                                             f"but its config.pbtxt declares {expected}")
            outputs.append((output, datatype, array))
        missing = [o for o in requested or () if o not in {t[0] for t in outputs}]
        if missing:
            raise InferenceCallableError(f"model '{name}' did not return requested output '{missing[0]}'")
        return outputs, "", json.loads(response.parameters())

    def close(self) -> None:
        """Run the model's `finalize()` (once)."""
        model, self.model = self.model, None
        try:
            self._wait_executed(CLOSE_WAIT_S)
            if self._execute_thread is not None:
                self._execute_thread.shutdown(wait=False)
            if model is not None and hasattr(model, "finalize"):
                model.finalize()
        finally:
            super().close()
