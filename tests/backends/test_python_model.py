"""PythonModelBackend and pb_utils, without a worker process: a TritonPythonModel's initialize args, its responses
(outputs, per-request errors, parameters), decoupled senders, finalize, and the features not supported yet."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from pytriton.backends import pb_utils
from pytriton.backends.callable_backend import InferenceCallableError
from pytriton.backends.python_model import PB_UTILS_MODULE, PythonModelBackend, python_model_target
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.types import Request

MODEL = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils

EVENTS = []

class TritonPythonModel:
    def initialize(self, args):
        EVENTS.append(("initialize", args))

    def execute(self, requests):
        responses = []
        for request in requests:
            x = request.get_input_tensor_by_name("X").as_numpy()
            mode = json.loads(request.parameters()).get("mode", "ok")
            if mode == "error":
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("bad request")))
            elif mode == "dtype":
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x.astype(np.float64))]))
            else:
                responses.append(pb_utils.InferenceResponse(
                    [pb_utils.Tensor("Y", x * 2), pb_utils.Tensor("Z", x + 1)], parameters={"n": len(requests)}))
        return responses

    def finalize(self):
        EVENTS.append(("finalize", None))
'''

STREAM = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        sender = requests[0].get_response_sender()
        for value in requests[0].get_input_tensor_by_name("X").as_numpy():
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([value], dtype=np.float32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''


def config(name: str, decoupled: bool = False) -> TritonModelConfig:
    return TritonModelConfig(model_name=name, inputs=[TensorSpec("X", "FP32", (-1,))],
                             outputs=[TensorSpec("Y", "FP32", (-1,)), TensorSpec("Z", "FP32", (-1,))],
                             decoupled=decoupled)


def backend_for(tmp_path: Path, name: str, source: str, decoupled: bool = False) -> PythonModelBackend:
    version_dir = tmp_path / name / "3"
    version_dir.mkdir(parents=True)
    (version_dir / "model.py").write_text(source)
    return PythonModelBackend(python_model_target(str(version_dir / "model.py")), config(name, decoupled))


def request(mode: str = "ok", requested: list[str] | None = None) -> Request:
    return Request({"X": np.array([1.0, 2.0], dtype=np.float32)}, {"mode": mode}, None, requested)


def test_initialize_gets_tritons_args_and_finalize_runs_on_close(tmp_path):
    backend = backend_for(tmp_path, "m1", MODEL)
    module = sys.modules["_pytriton_repository_model_m1_3"]
    assert sys.modules[PB_UTILS_MODULE] is pb_utils
    (event, args), = module.EVENTS
    assert event == "initialize"
    assert set(args) == {"model_config", "model_instance_kind", "model_instance_name", "model_instance_device_id",
                         "model_repository", "model_version", "model_name"}
    assert (args["model_instance_kind"], args["model_instance_name"], args["model_instance_device_id"]) == (
        "CPU", "m1_0_0", "0")
    assert (args["model_repository"], args["model_version"], args["model_name"]) == (str(tmp_path / "m1"), "3", "m1")
    assert json.loads(args["model_config"])["name"] == "m1"
    backend.close()
    backend.close()
    assert module.EVENTS[-1] == ("finalize", None) and len(module.EVENTS) == 2


def test_responses_errors_and_parameters_per_request(tmp_path):
    backend = backend_for(tmp_path, "m2", MODEL)
    requests = [request(), request("error"), request(requested=["Z"])]
    checked = backend.check_outputs(requests, backend(requests))
    (outputs, error, parameters) = checked[0]
    assert error == "" and parameters == {"n": 3}
    assert [(name, dt, a.tolist()) for name, dt, a in outputs] == [("Y", "FP32", [2.0, 4.0]), ("Z", "FP32", [2.0, 3.0])]
    assert checked[1] == ([], "bad request", {})
    assert [name for name, _, _ in checked[2][0]] == ["Z"]  # only what the request asked for


def test_an_output_that_does_not_match_the_config_fails_the_call(tmp_path):
    backend = backend_for(tmp_path, "m3", MODEL)
    with pytest.raises(InferenceCallableError, match="output 'Y' of model 'm3' has datatype FP64"):
        backend.check_outputs([request("dtype")], backend([request("dtype")]))


def test_decoupled_model_streams_each_response_sent(tmp_path):
    backend = backend_for(tmp_path, "m4", STREAM, decoupled=True)
    requests = [request()]
    sent = [backend.check_outputs(requests, raw)[0][0][0][2].tolist() for raw in backend.iterate(backend(requests))]
    assert sent == [[1.0], [2.0]]


STREAM_WHILE_EXECUTING = '''
import threading
import numpy as np
import triton_python_backend_utils as pb_utils

TAKEN = threading.Event()
WAITED = []

class TritonPythonModel:
    def execute(self, requests):
        sender = requests[0].get_response_sender()
        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([1.0], dtype=np.float32))]))
        WAITED.append(TAKEN.wait(10))  # the first response is taken while execute still runs
        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([2.0], dtype=np.float32))]),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''


def test_decoupled_responses_are_yielded_while_execute_runs_and_the_flagged_last_is_final(tmp_path):
    from pytriton.backends.callable_backend import FinalResponses

    backend = backend_for(tmp_path, "m5", STREAM_WHILE_EXECUTING, decoupled=True)
    module = sys.modules["_pytriton_repository_model_m5_3"]
    requests = [request()]
    stream = backend.iterate(backend(requests))
    first = next(stream)
    module.TAKEN.set()
    rest = list(stream)
    assert module.WAITED == [True]
    assert not isinstance(first, FinalResponses) and len(rest) == 1 and isinstance(rest[0], FinalResponses)
    assert backend.check_outputs(requests, rest[0])[0][0][0][2].tolist() == [2.0]
    backend.close()


def test_decoupled_execute_errors_reach_the_worker(tmp_path):
    source = STREAM.replace("sender.send(flags", "raise ValueError('boom')\n        sender.send(flags")
    backend = backend_for(tmp_path, "m6", source, decoupled=True)
    with pytest.raises(ValueError, match="boom"):
        list(backend.iterate(backend([request()])))
    backend.close()


def test_sender_refuses_after_final_and_non_decoupled_has_none():
    sender = pb_utils.InferenceResponseSender(0, lambda *args: None)
    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    with pytest.raises(pb_utils.TritonModelException, match="Response sender has been closed"):
        sender.send(pb_utils.InferenceResponse([]))
    received = pb_utils.InferenceRequest._received([], [], {}, None)
    with pytest.raises(NotImplementedError, match="get_response_sender"):
        received.get_response_sender()


@pytest.mark.parametrize("use, feature", [
    (lambda: pb_utils.MetricFamily(name="m", description="d", kind=pb_utils.MetricFamily.COUNTER), "custom metrics"),
    (lambda: pb_utils.ModelConfig({}), "auto_complete_config"),
])
def test_features_not_supported_yet_say_so(use, feature):
    with pytest.raises(NotImplementedError, match=f"{feature}.* is not supported by pytriton yet"):
        use()


def test_bls_outside_a_served_worker_says_why():
    request = pb_utils.InferenceRequest(model_name="other", inputs=[], requested_output_names=[])
    with pytest.raises(pb_utils.TritonModelException, match="only by a model that a pytriton server runs"):
        request.exec()


def test_helpers():
    config = {"input": [{"name": "A", "data_type": "TYPE_INT8"}], "output": [{"name": "B", "data_type": "TYPE_STRING"}]}
    assert pb_utils.get_input_config_by_name(config, "A")["data_type"] == "TYPE_INT8"
    assert pb_utils.get_output_config_by_name(json.dumps(config), "B")["name"] == "B"
    assert pb_utils.get_input_config_by_name(config, "B") is None
    assert pb_utils.triton_string_to_numpy("TYPE_FP16") is np.float16
    assert pb_utils.triton_string_to_numpy("TYPE_STRING") is np.object_
    error = pb_utils.TritonError("nope", pb_utils.TritonError.NOT_FOUND)
    assert (error.message(), error.code()) == ("nope", 2)
    assert pb_utils.TritonError("x").code() == pb_utils.TritonError.INTERNAL == 1
    tensor = pb_utils.Tensor("T", np.arange(3, dtype=np.int32))
    assert tensor.name() == "T" and tensor.is_cpu()
    assert pb_utils.Tensor.from_dlpack("U", tensor.as_numpy()).as_numpy().tolist() == [0, 1, 2]
    with pytest.raises(pb_utils.TritonModelException, match="tensor 'T': pb_utils.Tensor takes a numpy array"):
        pb_utils.Tensor("T", [1, 2])


def test_bls_to_itself_with_one_instance_is_answered_at_once():
    from pytriton.backends.bls import BlsClient

    config = TritonModelConfig(model_name="me", inputs=[], outputs=[TensorSpec("Y", "FP32", (-1,))])
    client = BlsClient(object(), config, lambda: True, 100)  # type: ignore[arg-type]
    response = client.exec(pb_utils.InferenceRequest(model_name="me", inputs=[]), False)
    assert response.has_error() and response.error().code() == pb_utils.TritonError.UNAVAILABLE
    assert "model 'me' has one instance" in response.error().message()
    [streamed] = list(client.exec(pb_utils.InferenceRequest(model_name="me", inputs=[]), True))
    assert streamed.has_error()
