"""PythonModelBackend and pb_utils, without a worker process: a TritonPythonModel's initialize args, its responses
(outputs, per-request errors, parameters), decoupled senders, finalize, and the features not supported yet."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from pytriton.backends import pb_utils
from pytriton.backends.callable_backend import InferenceCallableError
from pytriton.backends.python_model import PB_UTILS_MODULE, PythonModelBackend, python_model_target, reshaped
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.types import Request
from tests.backends.python_models import backend_for, request

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


def test_initialize_gets_tritons_args_and_finalize_runs_on_close(tmp_path):
    backend = backend_for(tmp_path, "m1", MODEL)
    module = sys.modules[type(backend.model).__module__]
    assert sys.modules[PB_UTILS_MODULE] is pb_utils
    (event, args), = module.EVENTS
    assert event == "initialize"
    assert set(args) == {"model_config", "model_instance_kind", "model_instance_name", "model_instance_device_id",
                         "model_repository", "model_version", "model_name"}
    assert (args["model_instance_kind"], args["model_instance_name"], args["model_instance_device_id"]) == (
        "CPU", "m1_0_0", "0")
    assert (args["model_repository"], args["model_version"], args["model_name"]) == (str(tmp_path / "m1"), "3", "m1")
    assert json.loads(args["model_config"])["name"] == "m1"
    assert pb_utils.get_model_dir() == str(tmp_path / "m1" / "3")  # Triton's: the folder of model.py
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


def test_an_output_keeps_its_own_datatype_as_in_triton(tmp_path):
    backend = backend_for(tmp_path, "m3", MODEL)
    outputs, error, _ = backend.check_outputs([request("dtype")], backend([request("dtype")]))[0]
    assert error == "" and [(name, dt, a.dtype) for name, dt, a in outputs] == [("Y", "FP64", np.float64)]


@pytest.mark.parametrize("shape, from_dims, to_dims, batched, expected", [
    ((4, 5, 6), (-1, 6), (-1, 2, 3), True, (4, 5, 2, 3)),
    ((4, 5, 2, 3), (-1, 2, 3), (-1, 6), True, (4, 5, 6)),
    ((3, 1), (1,), (), True, (3,)),
    ((2, 3), (2, 3), (6,), False, (6,)),
    ((7, 6), (-1, 6), (-1, 3, 2), False, (7, 3, 2)),
])
def test_reshaped_keeps_the_batch_and_carries_variable_sizes(shape, from_dims, to_dims, batched, expected):
    assert reshaped(shape, from_dims, to_dims, batched) == expected


def test_a_reshaped_output_is_checked_against_its_reshape_and_sent_as_its_dims(tmp_path):
    version_dir = tmp_path / "m5" / "1"
    version_dir.mkdir(parents=True)
    (version_dir / "model.py").write_text(
        "import triton_python_backend_utils as pb_utils\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        x = requests[0].get_input_tensor_by_name('X').as_numpy()\n"
        "        return [pb_utils.InferenceResponse([pb_utils.Tensor('Y', x.reshape(6) if x.shape == (2, 3) else x)])]\n")
    reshaping = TritonModelConfig(model_name="m5", inputs=[TensorSpec("X", "FP32", (6,), reshape=(2, 3))],
                                  outputs=[TensorSpec("Y", "FP32", (2, 3), reshape=(6,))])
    backend = PythonModelBackend(python_model_target(str(version_dir / "model.py")), reshaping)
    good = [Request({"X": np.arange(6, dtype=np.float32)}, {}, None, None)]
    for _ in range(2):  # (the second time as an output alike that passed the checks once)
        (outputs, _, _), = backend.check_outputs(good, backend(good))
        assert outputs[0][2].shape == (2, 3)  # the model saw X as [2, 3], returned [6]; the client gets dims [2, 3]
    wrong = TritonModelConfig(model_name="m5", inputs=[TensorSpec("X", "FP32", (6,))],
                              outputs=[TensorSpec("Y", "FP32", (2, 3), reshape=(3, 2))])
    backend = PythonModelBackend(python_model_target(str(version_dir / "model.py")), wrong)
    with pytest.raises(InferenceCallableError, match=r"output 'Y' of model 'm5' has shape \[6\], but its config.pbtxt "
                                                     r"declares \[3, 2\] \(its reshape\)"):
        backend.check_outputs(good, backend(good))


ECHO = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        answers = []
        for request in requests:
            x = request.get_input_tensor_by_name("X").as_numpy()
            mode = json.loads(request.parameters()).get("mode", "")
            request.requested_output_names().add("Z")  # (the model's own copy of the names)
            y = x.astype(np.float64) if mode == "fp64" else x
            answers.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y), pb_utils.Tensor("Z", x)]))
        return answers
"""


def test_every_execution_is_checked_though_an_output_alike_passed_before(tmp_path):
    version_dir = tmp_path / "m_fixed" / "1"
    version_dir.mkdir(parents=True)
    (version_dir / "model.py").write_text(ECHO)
    fixed = TritonModelConfig(model_name="m_fixed", inputs=[TensorSpec("X", "FP32", (-1,))],
                              outputs=[TensorSpec("Y", "FP32", (2,)), TensorSpec("Z", "FP32", (-1,))])
    backend = PythonModelBackend(python_model_target(str(version_dir / "model.py")), fixed)

    def run(values: list[float], mode: str = "", requested: list[str] | None = None) -> list[tuple[str, str, list]]:
        requests = [Request({"X": np.array(values, dtype=np.float32)}, {"mode": mode}, None, requested)]
        (outputs, error, _), = backend.check_outputs(requests, backend(requests))
        assert error == ""
        return [(name, datatype, array.tolist()) for name, datatype, array in outputs]

    assert run([1, 2], requested=["Y"]) == [("Y", "FP32", [1.0, 2.0])]  # (Z not sent: the model's list is its own)
    # (a shape other than the config's goes out as the model made it, as Triton's Python backend sends it)
    assert run([1, 2, 3], requested=["Y"]) == [("Y", "FP32", [1.0, 2.0, 3.0])]
    assert run([3, 4], "fp64", requested=["Y"]) == [("Y", "FP64", [3.0, 4.0])]  # (its own datatype, as in Triton)
    assert run([5, 6]) == [("Y", "FP32", [5.0, 6.0]), ("Z", "FP32", [5.0, 6.0])]
    assert run([5, 6], requested=["Z"]) == [("Z", "FP32", [5.0, 6.0])]


def test_a_received_request_has_an_empty_trace_and_the_request_fields():
    received = pb_utils.InferenceRequest._received(
        {"X": pb_utils.Tensor("X", np.zeros(2, np.float32))}, ["Y"], {"p": 1}, None, ("id-1", "seq", 1))
    assert (received.trace().get_context(), received.trace() is received.trace()) == (None, True)
    assert (received.request_id(), received.correlation_id(), received.flags(), received.parameters()) == (
        "id-1", "seq", 1, '{"p":1}')  # (compact, as Triton writes it)
    assert ([t.name() for t in received.inputs()], received.get_input_tensor_by_name("X").name(),
            received.requested_output_names(), received.timeout(), received.model_name(), received.model_version(),
            received.is_cancelled()) == (["X"], "X", {"Y"}, 0, "", -1, False)  # (a set, as Triton's)


def test_decoupled_model_streams_each_response_sent(tmp_path):
    backend = backend_for(tmp_path, "m4", STREAM, decoupled=True)
    requests = [request()]
    steps = [(backend.check_outputs(requests, raw)[0], raw.finals) for raw in backend.iterate(backend(requests))]
    # what was sent at once goes in one step, a request's second send in the next; the final flag closes the last
    assert [(checked[0][0][2].tolist() if checked else None, finals) for checked, finals in steps] == [
        ([1.0], [False]), ([2.0], [False]), (None, [True])]


BATCHED_STREAM = '''
import threading
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        senders = [r.get_response_sender() for r in requests]
        def answer(i):
            y = pb_utils.Tensor("Y", np.array([float(i)], dtype=np.float32))
            senders[i].send(pb_utils.InferenceResponse([y]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        senders[0].send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([9.0], dtype=np.float32))]))
        answer(2)
        threading.Thread(target=answer, args=(0,)).start()
        senders[1].send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''


def test_a_decoupled_batch_answers_each_request_on_its_own(tmp_path):
    backend = backend_for(tmp_path, "m5", BATCHED_STREAM, decoupled=True)
    requests = [request(), request(), request()]
    steps = []
    for raw in backend.iterate(backend(requests)):
        checked = backend.check_outputs(requests, raw)
        steps.append(([c[0][0][2].tolist() if c else None for c in checked], raw.finals))
    values = [v for responses, _ in steps for v in responses if v is not None]
    assert sorted(values) == [[0.0], [2.0], [9.0]] and values.index([9.0]) < values.index([0.0])
    assert [sum(finals[i] for _, finals in steps) for i in range(3)] == [1, 1, 1]  # each request's final, once
    assert all(finals[0] for responses, finals in steps if responses[0] == [0.0])  # (sent with its final flag)
    assert steps[0][0][:3:2] == [[9.0], [2.0]]  # sent before anything was read: in one step


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
    backend = backend_for(tmp_path, "m5", STREAM_WHILE_EXECUTING, decoupled=True)
    module = sys.modules[type(backend.model).__module__]
    requests = [request()]
    stream = backend.iterate(backend(requests))
    first = next(stream)
    module.TAKEN.set()
    rest = list(stream)
    assert module.WAITED == [True]
    assert first.finals == [False] and len(rest) == 1 and rest[0].finals == [True]
    assert backend.check_outputs(requests, rest[0])[0][0][0][2].tolist() == [2.0]
    backend.close()


def test_decoupled_execute_errors_reach_the_worker(tmp_path):
    source = STREAM.replace("sender.send(flags", "raise ValueError('boom')\n        sender.send(flags")
    backend = backend_for(tmp_path, "m6", source, decoupled=True)
    with pytest.raises(ValueError, match="boom"):
        list(backend.iterate(backend([request()])))
    backend.close()


def test_sender_refuses_after_final_and_a_request_outside_execute_has_none():
    sender = pb_utils.InferenceResponseSender(0, lambda *args: None)
    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    with pytest.raises(pb_utils.TritonModelException, match="Response sender has been closed"):
        sender.send(pb_utils.InferenceResponse([]))
    received = pb_utils.InferenceRequest._received({}, [], {}, None)  # (no execution made it a sender)
    with pytest.raises(pb_utils.TritonModelException, match="only to the requests execute"):
        received.get_response_sender()
    built = pb_utils.InferenceRequest(model_name="other", inputs=[], requested_output_names=[])
    with pytest.raises(pb_utils.TritonModelException, match="only to the requests execute"):
        built.get_response_sender()


def test_a_non_decoupled_sender_answers_once_in_tritons_words():
    """Triton's checks of a non-decoupled model's response sender (its UpdateStateAndCounters), in its words."""
    sent = []
    final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
    sender = pb_utils._OneResponseSender(0, lambda *args: sent.append(args))
    with pytest.raises(pb_utils.TritonModelException, match="^Unable to send response. Non-decoupled model cannot "
                                                            "send complete final before sending a response.$"):
        sender.send(flags=final)
    response = pb_utils.InferenceResponse([])
    sender.send(response)
    with pytest.raises(pb_utils.TritonModelException, match="^Unable to send response. Non-decoupled model cannot "
                                                            "send more than one response.$"):
        sender.send(response, flags=final)
    sender.send(flags=final)
    with pytest.raises(pb_utils.TritonModelException, match="Response sender has been closed"):
        sender.send(flags=final)
    assert sent == [(0, response, 0), (0, None, final)]


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
    assert pb_utils.using_decoupled_model_transaction_policy({"model_transaction_policy": {"decoupled": True}})
    assert not pb_utils.using_decoupled_model_transaction_policy(json.dumps({"model_transaction_policy": {}}))
    assert not pb_utils.using_decoupled_model_transaction_policy(config)
    error = pb_utils.TritonError("nope", pb_utils.TritonError.NOT_FOUND)
    assert (error.message(), error.code()) == ("nope", 2)
    assert pb_utils.TritonError("x").code() == pb_utils.TritonError.INTERNAL == 1
    tensor = pb_utils.Tensor("T", np.arange(3, dtype=np.int32))
    assert tensor.name() == "T" and tensor.is_cpu()
    assert pb_utils.Tensor.from_dlpack("U", tensor.as_numpy()).as_numpy().tolist() == [0, 1, 2]
    with pytest.raises(TypeError, match="the array of tensor 'T' must be a numpy array"):  # (as Triton's bindings)
        pb_utils.Tensor("T", [1, 2])


def test_a_bls_request_carries_the_call_chain_of_the_execution_that_makes_it():
    """The chains of the requests the instance serves now (each link once, in order), then the instance itself; between
    two executions only the instance (the server refuses a call that would wait for an instance on the chain)."""
    from pytriton.backends.bls import BlsClient
    from pytriton.proxy.messages import ServerToWorker, encode_chain

    config = TritonModelConfig(model_name="me", model_version=3, inputs=[], outputs=[TensorSpec("Y", "FP32", (-1,))])
    client = BlsClient(object(), config, lambda: True, 100, "me_0_1")  # type: ignore[arg-type]
    assert client.chain() == (("me", 3, "me_0_1"),)
    message = ServerToWorker(kind=ServerToWorker.INFER, id=1)
    encode_chain((("a", 1, "a_0_0"), ("b", 2, "b_0_0")), message.requests.add())
    message.requests.add()  # (a client's request in the same batch: no chain)
    encode_chain((("a", 1, "a_0_0"), ("c", 1, "")), message.requests.add())
    client.serving = message
    assert client.chain() == (("a", 1, "a_0_0"), ("b", 2, "b_0_0"), ("c", 1, ""), ("me", 3, "me_0_1"))


RESCHEDULING = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        answers = []
        for request in requests:
            mode = request.parameters()
            if "again" in mode:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
            y = pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([1.0], dtype=np.float32))])
            answers.append(None if "again" in mode and "answered" not in mode else y)
        return answers
'''


def test_a_rescheduled_request_is_sent_back_to_run_again_and_its_entry_must_be_none(tmp_path):
    from pytriton.proxy.endpoint import RESCHEDULED_RESPONSE  # noqa: PLC0415

    backend = backend_for(tmp_path, "m_again", RESCHEDULING)
    requests = [request("again"), request()]
    checked = backend.check_outputs(requests, backend(requests))
    assert checked[0] is RESCHEDULED_RESPONSE
    assert [a.tolist() for _, _, a in checked[1][0]] == [[1.0]]
    with pytest.raises(InferenceCallableError) as caught:  # (the whole execution fails, as on Triton)
        backend([request("again answered")])
    assert str(caught.value) == (
        "Expected a None object in the execute function return list for reschduled request, found type "
        "'<class 'c_python_backend_utils.InferenceResponse'>'.")


RESCHEDULING_STREAM = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            y = pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([1.0], dtype=np.float32))])
            if "again" in request.parameters():
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                request.get_response_sender().send(y)
            else:
                request.get_response_sender().send(y, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''


def test_a_decoupled_request_given_back_ends_its_execution_once_execute_returned(tmp_path):
    from pytriton.proxy.endpoint import RESCHEDULED_RESPONSE  # noqa: PLC0415

    backend = backend_for(tmp_path, "m_again_stream", RESCHEDULING_STREAM, decoupled=True)
    requests = [request("again"), request()]
    steps = [(backend.check_outputs(requests, raw), raw.finals) for raw in backend.iterate(backend(requests))]
    # both responses at once, then (what it sent came first) the rescheduled request's end of this execution
    assert [([None if c is None else "again" if c is RESCHEDULED_RESPONSE else c[0][0][2].tolist() for c in checked],
             finals) for checked, finals in steps] == [
        ([[1.0], [1.0]], [False, True]), (["again", None], [True, False])]


ONLY_REQUESTED = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        answers = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X")
            wanted = request.requested_output_names()
            answers.append(pb_utils.InferenceResponse([pb_utils.Tensor(name, x.as_numpy()) for name in ("Y", "Z")
                                                       if name in wanted]))
        return answers
"""


def test_a_request_that_names_no_output_asks_for_all_of_them(tmp_path):
    """As Triton fills them in: a model that computes only the outputs asked for computes them all."""
    backend = backend_for(tmp_path, "m_only", ONLY_REQUESTED)

    def names(requested: list[str] | None) -> list[str]:
        requests = [request(requested=requested)]
        (outputs, error, _), = backend.check_outputs(requests, backend(requests))
        assert error == ""
        return [name for name, _, _ in outputs]

    assert names(None) == ["Y", "Z"]
    assert names(["Z"]) == ["Z"]
