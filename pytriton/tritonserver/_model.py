"""`Model`: one model of an in-process server, by name and version (-1: the one served); validated when used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, cast

from pytriton.tritonserver._enums import ModelBatchFlag, ModelTxnPropertyFlag
from pytriton.tritonserver._errors import InvalidArgumentError, TritonError
from pytriton.tritonserver._pybind import BINDINGS, check_method
from pytriton.tritonserver._request import InferenceRequest
from pytriton.tritonserver._response import AsyncResponseIterator, RequestRun, ResponseIterator

if TYPE_CHECKING:
    import asyncio

    from pytriton.tritonserver._runtime import ServerRuntime
    from pytriton.tritonserver._server import Server


_MESSAGE = f"{BINDINGS}.TRITONSERVER_Message"


class Model:
    """A model of a started server: metadata, configuration, statistics and inference."""

    def __init__(self, server: Server, name: str, version: int = -1, state: Optional[str] = None,
                 reason: Optional[str] = None) -> None:
        self._runtime: ServerRuntime = server._started()
        self.name = name
        self.version = version
        self.state = state
        self.reason = reason

    @property
    def _version(self) -> str:
        return "" if self.version < 0 else str(self.version)

    def _check(self, method: str, returns: str, *extra: tuple[str, Any]) -> None:
        """Triton's TypeError when the name or version cannot go to `TRITONSERVER_Server.<method>` (pybind11)."""
        kinds = ["str", "int", *(kind for kind, _ in extra)]
        check_method("TRITONSERVER_Server", method, kinds, returns, self.name, self.version,
                     *(value for _, value in extra))

    def _core(self, method: str, *args: Any) -> Any:
        runtime = self._runtime
        return runtime.run(lambda: getattr(runtime.core, method)(*args))

    # ---- inference ---------------------------------------------------------------------------------
    def create_request(self, **kwargs: Any) -> InferenceRequest:
        kwargs.pop("model", None)
        return InferenceRequest(model=self, **kwargs)

    def _request(self, inference_request: InferenceRequest | None, kwargs: dict[str, Any]) -> InferenceRequest:
        if inference_request is None:
            try:
                return InferenceRequest(model=self, **kwargs)
            except TypeError as exc:
                raise InvalidArgumentError(str(exc)) from None
        return inference_request

    def infer(self, inference_request: InferenceRequest | None = None, raise_on_error: bool = True,
              **kwargs: Any) -> ResponseIterator:
        """Send a request; its responses come from the returned iterator (and its `response_queue`)."""
        request = self._request(inference_request, kwargs)
        iterator = ResponseIterator(self, request, raise_on_error)
        iterator._run = RequestRun(self._runtime, self, request, iterator._deliver)
        iterator._run.submit()
        return iterator

    def async_infer(self, inference_request: InferenceRequest | None = None, raise_on_error: bool = True,
                    loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any) -> AsyncResponseIterator:
        """Send a request from an asyncio caller; its responses come from the returned async iterator."""
        request = self._request(inference_request, kwargs)
        iterator = AsyncResponseIterator(self, request, raise_on_error, loop)
        iterator._run = RequestRun(self._runtime, self, request, iterator._deliver)
        iterator._run.submit()
        return iterator

    # ---- what the model is -------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        self._check("model_metadata", _MESSAGE)
        return cast(dict[str, Any], self._core("model_metadata", self.name, self._version))

    def ready(self) -> bool:
        self._check("model_is_ready", "bool")
        try:
            return bool(self._core("model_ready", self.name, self._version))
        except TritonError:  # an unknown model or version is not ready
            return False

    def batch_properties(self) -> ModelBatchFlag:
        self._check("model_batch_properties", "tuple[int, int]")
        config = self._config()
        return ModelBatchFlag.FIRST_DIM if config.max_batch_size > 0 else ModelBatchFlag.UNKNOWN

    def transaction_properties(self) -> ModelTxnPropertyFlag:
        self._check("model_transaction_properties", "tuple[int, int]")
        return ModelTxnPropertyFlag.DECOUPLED if self._config().decoupled else ModelTxnPropertyFlag.ONE_TO_ONE

    def _config(self) -> Any:
        runtime = self._runtime
        return runtime.run(lambda: runtime.core.registry.get(self.name, self._version).config)

    def statistics(self) -> dict[str, Any]:
        self._check("model_statistics", _MESSAGE)
        return {"model_stats": self._core("statistics", self.name, self._version)}

    def config(self, config_version: int = 1) -> dict[str, Any]:
        self._check("model_config", _MESSAGE, ("uint", config_version))
        if config_version != 1:
            raise InvalidArgumentError(f"model configuration version {config_version} not supported, supported "
                                       "versions are: 1")
        return cast(dict[str, Any], self._core("model_config", self.name, self._version))

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        return str({"name": self.name, "version": self.version, "state": self.state})


__all__ = ["Model"]
