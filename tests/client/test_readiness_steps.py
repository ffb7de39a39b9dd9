"""Readiness, model state and model configuration steps, run by both drivers against scripted fake clients."""

from __future__ import annotations

import asyncio

import pytest
from tritonclient.utils import InferenceServerException

from pytriton.client._readiness import (
    ModelState,
    fetch_model_config_steps,
    model_ready_steps,
    model_state_steps,
    server_ready_steps,
)
from pytriton.client._steps import Pause, ServerCall, run_asyncio, run_blocking
from pytriton.client.exceptions import (
    PyTritonClientInferenceServerError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
)

RESTRICTED = InferenceServerException("This API is restricted, expecting header 'triton-access-token'")
UNKNOWN_MODEL = InferenceServerException("Request for unknown model: 'm' is not found")
CONFIG = {"name": "m", "max_batch_size": 4, "input": [{"name": "A", "data_type": "TYPE_FP32", "dims": [-1]}],
          "output": [{"name": "B", "data_type": "TYPE_FP32", "dims": [-1]}]}


class ScriptedClient:
    """A tritonclient stand-in: each method answers from its script (the last answer repeats)."""

    def __init__(self, **script):
        self.script = {name: list(answers) for name, answers in script.items()}
        self.calls: list[tuple[str, tuple, dict]] = []

    def answer(self, name, args, kwargs):
        self.calls.append((name, args, kwargs))
        answers = self.script[name]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def count(self, name: str) -> int:
        return sum(1 for call in self.calls if call[0] == name)

    def __getattr__(self, name):
        if name not in self.script:
            raise AttributeError(name)
        return lambda *args, **kwargs: self.answer(name, args, kwargs)


class AsyncioScriptedClient(ScriptedClient):
    """The same, with coroutine methods like the `.aio` clients; `hang` makes a method never answer."""

    def __init__(self, hang: tuple[str, ...] = (), **script):
        super().__init__(**script)
        self.hang = hang

    def __getattr__(self, name):
        if name not in self.script:
            raise AttributeError(name)

        async def method(*args, **kwargs):
            if name in self.hang:
                self.calls.append((name, args, kwargs))
                await asyncio.sleep(3600)
            return self.answer(name, args, kwargs)

        return method


def run_both(make_steps, **script):
    """Run the steps made by `make_steps(client)` with each driver; [(client, result or exception)]."""
    outcomes = []
    for client, run in ((ScriptedClient(**script), run_blocking),
                        (AsyncioScriptedClient(**script), lambda steps: asyncio.run(run_asyncio(steps)))):
        try:
            outcomes.append((client, run(make_steps(client))))
        except Exception as exc:  # noqa: BLE001 - compared by the test
            outcomes.append((client, exc))
    return outcomes


def test_server_ready_polls_through_connection_errors():
    refused = ConnectionRefusedError("refused")
    for client, result in run_both(lambda c: server_ready_steps(c, 30.0, {"h": 1}),
                                   is_server_live=[refused, refused, True], is_server_ready=[True]):
        assert result is None
        assert client.count("is_server_live") == 3 and client.count("is_server_ready") == 1
        assert client.calls[-1][2] == {"headers": {"h": "1"}}  # a fake is no gRPC client: no client_timeout


def test_server_never_ready_times_out_with_the_last_reason():
    for _, error in run_both(lambda c: server_ready_steps(c, 0.2, None),
                             is_server_live=[True], is_server_ready=[False]):
        assert isinstance(error, PyTritonClientTimeoutError)
        assert error.message == "Waiting for the server to be ready timed out after 0.2 s (server is not ready)."
    for _, error in run_both(lambda c: server_ready_steps(c, 0.2, None),
                             is_server_live=[InferenceServerException("connection reset")]):
        assert isinstance(error, PyTritonClientTimeoutError) and "(connection reset)" in error.message


def test_a_refused_readiness_check_raises_at_once():
    for client, error in run_both(lambda c: server_ready_steps(c, 30.0, None), is_server_live=[RESTRICTED]):
        assert isinstance(error, PyTritonClientInferenceServerError)
        assert error.message.startswith("Error occurred during checking server readiness. Message: This API is")
        assert client.count("is_server_live") == 1


def test_an_unknown_model_is_unavailable_when_the_wait_ends():
    steps = lambda c: model_ready_steps(c, "m", None, 0.2, None)
    ready_server = {"is_server_live": [True], "is_server_ready": [True], "is_model_ready": [False]}
    # not listed in the repository index
    for client, error in run_both(steps, **ready_server, get_model_repository_index=[[{"name": "other"}]]):
        assert isinstance(error, PyTritonClientModelUnavailableError)
        assert error.message == "Model m is not available on the server (not found within 0.2 s)."
        assert client.calls[-1][0] == "get_model_repository_index"
    # the index is restricted: the metadata says the model is unknown
    for client, error in run_both(steps, **ready_server, get_model_repository_index=[RESTRICTED],
                                  get_model_metadata=[UNKNOWN_MODEL]):
        assert isinstance(error, PyTritonClientModelUnavailableError)
        assert client.calls[-1][:2] == ("get_model_metadata", ("m", ""))


def test_a_known_model_that_is_not_ready_times_out():
    steps = lambda c: model_ready_steps(c, "m", "2", 0.2, None)
    for _, error in run_both(steps, is_server_live=[True], is_server_ready=[True], is_model_ready=[False],
                             get_model_repository_index=[[{"name": "m", "version": "2", "state": "LOADING"}]]):
        assert isinstance(error, PyTritonClientTimeoutError)
        assert error.message == "Waiting for model m/2 to be ready timed out after 0.2 s (model is not ready)."


def test_model_state_from_the_index_or_from_readiness():
    index = [{"name": "m", "version": "1", "state": "UNLOADING"}, {"name": "m", "version": "2", "state": "READY"}]
    for _, state in run_both(lambda c: model_state_steps(c, "m", None, None, 1.0), get_model_repository_index=[index]):
        assert state is ModelState.READY
    for _, state in run_both(lambda c: model_state_steps(c, "m", "1", None, 1.0), get_model_repository_index=[index]):
        assert state is ModelState.UNLOADING
    unimplemented = InferenceServerException("not implemented", status="StatusCode.UNIMPLEMENTED")
    for _, state in run_both(lambda c: model_state_steps(c, "m", None, None, 1.0),
                             get_model_repository_index=[unimplemented], is_model_ready=[UNKNOWN_MODEL]):
        assert state is ModelState.UNAVAILABLE


def test_model_config_is_parsed_and_its_errors_name_the_model():
    for client, config in run_both(lambda c: fetch_model_config_steps(c, "m", None, None, 1.0),
                                   get_model_config=[CONFIG]):
        assert config.model_name == "m" and config.max_batch_size == 4
        assert [spec.name for spec in config.inputs] == ["A"]
        assert client.calls == [("get_model_config", ("m", ""), {"headers": None})]
    for _, error in run_both(lambda c: fetch_model_config_steps(c, "m", None, None, 1.0),
                             get_model_config=[InferenceServerException("boom")]):
        assert isinstance(error, PyTritonClientInferenceServerError)
        assert error.message == "Error occurred during obtaining the configuration of model m. Message: boom"


def test_asyncio_driver_bounds_each_call_by_its_timeout():
    client = AsyncioScriptedClient(hang=("is_server_live",), is_server_live=[True], is_server_ready=[True])
    with pytest.raises(PyTritonClientTimeoutError, match="timed out after 0.3 s"):
        asyncio.run(run_asyncio(server_ready_steps(client, 0.3, None)))
    assert client.count("is_server_live") >= 1


def test_asyncio_cancellation_is_not_taken_for_a_failed_poll():
    async def main():
        client = AsyncioScriptedClient(is_server_live=[False])
        task = asyncio.ensure_future(run_asyncio(server_ready_steps(client, 60.0, None)))
        while client.count("is_server_live") < 2:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 30.0)

    asyncio.run(main())


def test_drivers_send_results_and_throw_errors_where_the_call_was_made():
    def steps(client):
        first = yield ServerCall(client.echo, ("a",))
        try:
            yield ServerCall(client.fail)
        except KeyError as exc:
            second = f"caught {exc.args[0]}"
        yield Pause(0.0)
        return first, second

    for _, result in run_both(steps, echo=["A"], fail=[KeyError("k")]):
        assert result == ("A", "caught k")
