"""A gRPC stream begun with the header `triton_grpc_error: true` (Triton's "gRPC error" mode, which Triton's
qa/L0_backend_python/lifecycle tests use): the first error a request meets once issued ends the stream with that
error's gRPC status, where a stream without the header carries it as the request's `error_message` and goes on. An
error in the request itself (an unknown input) stays its `error_message` in both, as in tritonserver 2.51."""

from __future__ import annotations

import queue

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.paths import REPO
from tests._support.serving import serve

ANSWER_S = 30  # at most, for each answer (they come at once)


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPO / "tests" / "repositories" / "grpc_error_mode")) as s:
        yield s


class Stream:
    """A tritonclient stream whose answers are read one at a time: ("ok", Y), ("error", status, message)."""

    def __init__(self, server, headers: dict[str, str] | None):
        self.answers: queue.Queue = queue.Queue()
        self.client = grpcclient.InferenceServerClient(server.grpc_url)
        self.client.start_stream(callback=self._answer, headers=headers)

    def _answer(self, result, error):
        self.answers.put(("error", error.status(), error.message()) if error is not None
                         else ("ok", result.as_numpy("Y").tolist()))

    def send(self, model: str, x: float, name: str = "X") -> None:
        tensor = grpcclient.InferInput(name, [1], "FP32")
        tensor.set_data_from_numpy(np.array([x], dtype=np.float32))
        self.client.async_stream_infer(model, [tensor])

    def next(self):
        return self.answers.get(timeout=ANSWER_S)

    def close(self) -> None:
        self.client.stop_stream()
        self.client.close()


@pytest.fixture()
def stream(server, request):
    made = Stream(server, request.param)
    yield made
    made.close()


GRPC_ERRORS = {"triton_grpc_error": "true"}


@pytest.mark.parametrize("stream", [GRPC_ERRORS], indirect=True)
def test_a_model_error_ends_the_stream_with_its_status(stream):
    stream.send("answer_or_error", 1.0, name="NOPE")  # (the request's own error: the stream goes on)
    assert stream.next() == ("error", None, "unexpected inference input 'NOPE' for model 'answer_or_error'")
    stream.send("answer_or_error", 1.0)
    assert stream.next() == ("ok", [1.0])
    stream.send("answer_or_error", 2.0)
    assert stream.next() == ("error", "StatusCode.INVALID_ARGUMENT", "X[0] is 2")
    with pytest.raises(InferenceServerException, match="The stream is no longer in valid state"):
        stream.send("answer_or_error", 1.0)


@pytest.mark.parametrize("stream", [GRPC_ERRORS], indirect=True)
def test_a_failed_execution_ends_the_stream_with_its_status(stream):
    stream.send("answer_or_error", 3.0)
    kind, status, message = stream.next()
    assert (kind, status) == ("error", "StatusCode.INTERNAL") and "X[0] is 3" in message


@pytest.mark.parametrize("stream", [GRPC_ERRORS], indirect=True)
def test_a_decoupled_models_error_response_ends_the_stream(stream):
    stream.send("sends_then_error", 4.0)
    assert stream.next() == ("ok", [4.0])
    assert stream.next() == ("error", "StatusCode.INTERNAL", "sent after Y")


@pytest.mark.parametrize("stream", [GRPC_ERRORS], indirect=True)
def test_a_decoupled_models_failed_execution_ends_the_stream(stream):
    stream.send("sends_then_error", 3.0)
    kind, status, message = stream.next()
    assert (kind, status) == ("error", "StatusCode.INTERNAL") and "X[0] is 3" in message
    with pytest.raises(InferenceServerException, match="The stream is no longer in valid state"):
        stream.send("sends_then_error", 4.0)


@pytest.mark.parametrize("stream", [None, {"triton_grpc_error": "false"}], indirect=True)
def test_without_the_header_errors_are_answers_and_the_stream_goes_on(stream):
    stream.send("answer_or_error", 2.0)
    assert stream.next() == ("error", None, "X[0] is 2")
    stream.send("sends_then_error", 4.0)
    assert (stream.next(), stream.next()) == (("ok", [4.0]), ("error", None, "sent after Y"))
    stream.send("answer_or_error", 1.0)
    assert stream.next() == ("ok", [1.0])
