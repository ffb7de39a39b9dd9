"""The seed's `>>>` examples of Server and Model against tests/repositories/models (model control NONE): start,
health, metadata, metrics, models(), infer with numpy, DLPack, bytes and strings, decoupled, async, cancel,
allocators, statistics; and that a stopped server leaves no process, thread or shared memory behind."""

from __future__ import annotations

import asyncio
import gc
import os
import queue
import threading
from pathlib import Path

import numpy
import pytest

import pytriton.tritonserver as tritonserver

REPOSITORIES = Path(__file__).resolve().parent.parent / "repositories"
MODELS = str(REPOSITORIES / "models")


def _our_segments() -> list[str]:
    return [e for e in os.listdir("/dev/shm") if e.startswith("pytriton_") and f"_{os.getpid()}_" in e]


@pytest.fixture(scope="module")
def server():
    server = tritonserver.Server(model_repository=[MODELS, str(REPOSITORIES / "inprocess")], exit_timeout=5)
    server.start(wait_until_ready=True, timeout=60)
    yield server
    server.stop()
    gc.collect()
    assert _our_segments() == []
    assert not [t for t in threading.enumerate() if t.name == "tritonserver-loop"]


def add_sub_inputs(a: float = 1.0, b: float = 1.0) -> dict[str, numpy.ndarray]:
    return {"INPUT0": numpy.full((1, 4), a, numpy.float32), "INPUT1": numpy.full((1, 4), b, numpy.float32)}


def test_top_level_package_is_the_same_objects():
    import tritonserver as top

    assert top.Server is tritonserver.Server and top.Tensor is tritonserver.Tensor


def test_health_and_metadata(server):
    assert server.live() is True
    assert server.ready() is True
    metadata = server.metadata()
    assert metadata["name"] == "triton"
    assert "model_repository" in metadata["extensions"] and "statistics" in metadata["extensions"]


def test_start_twice_and_unstarted_server_refused(server):
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server already started"):
        server.start()
    idle = tritonserver.Server(model_repository=MODELS)
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        idle.model("add_sub")
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        idle.models()


def test_models_keyed_by_name_and_version(server):
    models = server.models()
    assert ("add_sub", 1) in models and ("versioned", 2) in models
    assert models["add_sub", 1].state == "READY"
    assert repr(models["add_sub", 1]) == "{'name': 'add_sub', 'version': 1, 'state': 'READY'}"
    assert models["add_sub"].version == -1  # a bare name: the model's latest version
    with pytest.raises(KeyError, match="Unknown Model"):
        models["nope"]
    assert set(server.models(exclude_not_ready=True)) == set(models)


def test_model_properties(server):
    model = server.model("add_sub")
    assert str(model) == "{'name': 'add_sub', 'version': -1, 'state': None}"
    assert model.ready() is True
    assert server.model("nope").ready() is False
    assert model.metadata() == {
        "name": "add_sub", "versions": ["1"], "platform": "python",
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]},
                   {"name": "INPUT1", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 4]},
                    {"name": "OUTPUT1", "datatype": "FP32", "shape": [-1, 4]}]}
    config = model.config()
    assert config["name"] == "add_sub" and config["max_batch_size"] == 8 and config["backend"] == "python"
    assert model.batch_properties() == tritonserver.ModelBatchFlag.FIRST_DIM
    assert server.model("text_upper").batch_properties() == tritonserver.ModelBatchFlag.UNKNOWN
    assert model.transaction_properties() == tritonserver.ModelTxnPropertyFlag.ONE_TO_ONE
    assert server.model("repeat_int").transaction_properties() == tritonserver.ModelTxnPropertyFlag.DECOUPLED
    with pytest.raises(tritonserver.NotFoundError, match="Request for unknown model: .nope. is not found"):
        server.model("nope").metadata()


def test_infer_with_numpy_returns_zero_copy_outputs(server):
    responses = list(server.model("add_sub").infer(inputs=add_sub_inputs(3.0, 1.0)))
    assert len(responses) == 1
    response = responses[0]
    assert response.final is True and response.error is None
    output = response.outputs["OUTPUT0"]
    assert output.data_type == tritonserver.DataType.FP32 and list(output.shape) == [1, 4]
    array = numpy.from_dlpack(output)
    numpy.testing.assert_array_equal(array, numpy.full((1, 4), 4.0, numpy.float32))
    assert array.ctypes.data == output.data_ptr  # the array views the response's shared memory
    numpy.testing.assert_array_equal(numpy.from_dlpack(response.outputs["OUTPUT1"]), numpy.full((1, 4), 2.0))


def test_infer_with_a_request_object_and_dlpack_tensor(server):
    request = server.model("add_sub").create_request()
    request.inputs["INPUT0"] = tritonserver.Tensor.from_dlpack(numpy.full((2, 4), 5.0, numpy.float32))
    request.inputs["INPUT1"] = numpy.ones((2, 4), numpy.float32)
    for response in server.model("add_sub").infer(request):
        numpy.testing.assert_array_equal(numpy.from_dlpack(response.outputs["OUTPUT1"]), numpy.full((2, 4), 4.0))


def test_infer_with_bytes_and_strings(server):
    model = server.model("text_upper")
    response = next(iter(model.infer(inputs={"TEXT": numpy.array([b"hello", b"world"], dtype=object)})))
    assert list(response.outputs["UPPER"].to_bytes_array()) == [b"HELLO", b"WORLD"]
    response = next(iter(model.infer(inputs={"TEXT": tritonserver.Tensor.from_string_array(["abc"])},
                                     parameters={"suffix": "!"})))
    assert list(response.outputs["UPPER"].to_string_array()) == ["ABC!"]


def test_seed_infer_example_with_a_list_of_strings(server):
    """`server.model("test_2").infer(inputs={"text_input": ["hello"]})` of the seed, and what printing its response
    shows: the version that ran, the request id ('' when the request had none), BYTES outputs."""
    responses = list(server.model("text_upper").infer(inputs={"TEXT": ["hello"]}))
    response = responses[0]
    text = repr(response)
    assert text.startswith("InferenceResponse(model={'name': 'text_upper', 'version': 1, 'state': None}, "
                           "request_id='', parameters={}, outputs={'UPPER': Tensor(data_type=<TRITONSERVER_DataType."
                           "BYTES: 13>, shape=[1], memory_buffer=MemoryBuffer(data_ptr=")
    assert text.endswith("error=None, classification_label=None, final=True)")
    assert repr(response.outputs["UPPER"].to_bytes_array()) == "array([b'HELLO'], dtype=object)"
    assert server.model("text_upper").version == -1  # the caller's Model object is left as it was
    (named,) = list(server.model("add_sub").infer(inputs=add_sub_inputs(), request_id="r-7"))
    assert named.request_id == "r-7" and named.model.version == 1
    (last,) = [r for r in server.model("repeat_int").infer(inputs={"IN": numpy.array([1], numpy.int32)}) if r.final]
    assert last.request_id == "" and last.model.version == 1  # the empty final one names the version that ran too


def test_seed_create_request_and_metadata_examples(server):
    assert repr(server.model("add_sub").create_request()).startswith(
        "InferenceRequest(model={'name': 'add_sub', 'version': -1, 'state': None}, request_id=None, flags=0, "
        "correlation_id=None, priority=0, timeout=0, inputs={}, parameters={}, output_memory_type=None, "
        "output_memory_allocator=None, response_queue=None")
    metadata = server.metadata()
    assert set(metadata) == {"name", "version", "extensions"} and metadata["version"].count(".") == 2
    config = server.model("repeat_int").config()
    assert {"name", "platform", "backend", "version_policy", "max_batch_size", "input", "output", "batch_input",
            "batch_output", "optimization", "instance_group", "default_model_filename", "cc_model_filenames",
            "metric_tags", "parameters", "model_warmup", "model_transaction_policy"} <= set(config)
    assert config["model_transaction_policy"] == {"decoupled": True}
    assert config["input"][0]["format"] == "FORMAT_NONE" and config["output"][0]["label_filename"] == ""


def test_errors_raised_with_the_network_api_messages(server):
    with pytest.raises(tritonserver.InvalidArgumentError, match="expected 2 inputs but got 3 inputs for model 'add_sub'"):
        server.model("add_sub").infer(inputs={**add_sub_inputs(), "NOPE": numpy.zeros((1, 4), numpy.float32)})
    with pytest.raises(tritonserver.NotFoundError, match="Request for unknown model"):
        server.model("nope").infer(inputs={"X": numpy.zeros(1)})
    # the model's own error response: raised by the iterator, or returned with raise_on_error=False
    with pytest.raises(tritonserver.TritonError, match="text_upper refuses 'fail'"):
        list(server.model("text_upper").infer(inputs={"TEXT": numpy.array([b"fail"], dtype=object)}))
    responses = list(server.model("text_upper").infer(inputs={"TEXT": numpy.array([b"fail"], dtype=object)},
                                                      raise_on_error=False))
    assert responses[-1].final and "refuses" in str(responses[-1].error)


def test_decoupled_model_streams_responses_into_a_simple_queue(server):
    user_queue: queue.SimpleQueue = queue.SimpleQueue()
    responses = list(server.model("repeat_int").infer(inputs={"IN": numpy.array([4, 5, 6], numpy.int32)},
                                                      response_queue=user_queue))
    values = [int(numpy.from_dlpack(r.outputs["OUT"])[0]) for r in responses if r.outputs]
    assert values == [4, 5, 6]
    assert responses[-1].final and [r.final for r in responses[:-1]] == [False] * (len(responses) - 1)
    queued = [user_queue.get(timeout=5) for _ in responses]
    assert queued == responses


def test_decoupled_final_flag_on_the_last_response_or_alone(server):
    """As Triton's in-process API: a response the model sent with the final flag comes flagged final (no empty one
    follows); a flag sent alone comes as an empty final response."""
    responses = list(server.model("count_final").infer(inputs={"IN": numpy.array([3], numpy.int32)}))
    assert [int(numpy.from_dlpack(r.outputs["OUT"])[0]) for r in responses] == [1, 2, 3]
    assert [r.final for r in responses] == [False, False, True]
    (alone,) = list(server.model("count_final").infer(inputs={"IN": numpy.array([0], numpy.int32)}))
    assert alone.final and alone.outputs == {} and alone.error is None
    responses = list(server.model("repeat_int").infer(inputs={"IN": numpy.array([4, 5], numpy.int32)}))
    assert [r.final for r in responses] == [False, False, True] and responses[-1].outputs == {}

    async def run() -> list:
        return [r async for r in server.model("count_final").async_infer(inputs={"IN": numpy.array([2], numpy.int32)})]

    assert [r.final for r in asyncio.run(run())] == [False, True]


def test_async_infer_with_an_asyncio_queue(server):
    async def run() -> list:
        responses_queue: asyncio.Queue = asyncio.Queue()
        results = []
        async for response in server.model("repeat_int").async_infer(
                inputs={"IN": numpy.array([7, 8], numpy.int32)}, response_queue=responses_queue):
            results.append(response)
        assert responses_queue.qsize() == len(results)
        return results

    responses = asyncio.run(run())
    assert [int(numpy.from_dlpack(r.outputs["OUT"])[0]) for r in responses if r.outputs] == [7, 8]
    assert responses[-1].final


def test_cancel_a_streaming_request(server):
    responses = server.model("slow_stream").infer(inputs={"IN": numpy.arange(50, dtype=numpy.int32)},
                                                  raise_on_error=False)
    first = next(responses)
    assert int(numpy.from_dlpack(first.outputs["OUT"])[0]) == 0
    responses.cancel()
    rest = list(responses)
    assert len(rest) < 10
    assert isinstance(rest[-1].error, tritonserver.CancelledError) and rest[-1].final


def test_cancel_with_raise_on_error(server):
    responses = server.model("slow_stream").infer(inputs={"IN": numpy.arange(50, dtype=numpy.int32)})
    next(responses)
    responses.cancel()
    with pytest.raises(tritonserver.CancelledError):
        list(responses)


class RecordingAllocator(tritonserver.MemoryAllocator):
    def __init__(self):
        self.buffers: list = []

    def allocate(self, size, memory_type, memory_type_id):
        array = numpy.zeros(size, numpy.uint8)
        self.buffers.append(array)
        return tritonserver.MemoryBuffer.from_dlpack(array)


def test_outputs_land_in_the_allocators_buffers(server):
    allocator = RecordingAllocator()
    response = next(iter(server.model("add_sub").infer(inputs=add_sub_inputs(2.0, 2.0),
                                                       output_memory_allocator=allocator)))
    assert len(allocator.buffers) == 2
    output = response.outputs["OUTPUT0"]
    assert output.data_ptr in {b.ctypes.data for b in allocator.buffers}
    numpy.testing.assert_array_equal(numpy.from_dlpack(output), numpy.full((1, 4), 4.0))


def test_response_memory_goes_back_when_the_last_view_is_collected(server):
    from pytriton.core.types import InferResponse
    from pytriton.core.types import Tensor as CoreTensor
    from pytriton.tritonserver._response import make_response

    released = []

    class Runtime:  # runs the release at once (the real one schedules it on the server's loop)
        @staticmethod
        def call_soon(callback, *args):
            callback(*args)

    data = bytearray(numpy.arange(4, dtype=numpy.float32).tobytes())
    core_response = InferResponse("m", "1", "", [CoreTensor("Y", "FP32", (4,), memoryview(data))],
                                  _release=lambda: released.append(True))
    request = server.model("add_sub").create_request()
    response = make_response(server.model("add_sub"), request, core_response, Runtime(), final=True)
    array = numpy.from_dlpack(response.outputs["Y"])
    assert array.ctypes.data == numpy.frombuffer(data, numpy.uint8).ctypes.data  # no copy
    del response
    gc.collect()
    assert released == [] and array.tolist() == [0.0, 1.0, 2.0, 3.0]
    del array
    gc.collect()
    assert released == [True]


def test_statistics_count_in_process_requests(server):
    before = server.model("add_sub").statistics()["model_stats"][0]["inference_stats"]["success"]["count"]
    for _ in range(3):
        list(server.model("add_sub").infer(inputs=add_sub_inputs()))
    stats = server.model("add_sub").statistics()["model_stats"][0]
    assert stats["name"] == "add_sub" and stats["version"] == "1"
    assert stats["inference_stats"]["success"]["count"] == before + 3


def test_metrics_in_prometheus_text(server):
    list(server.model("add_sub").infer(inputs=add_sub_inputs()))
    text = server.metrics()
    assert 'nv_inference_request_success{model="add_sub",version="1"}' in text
    assert "nv_cpu_utilization" in text
    with pytest.raises(TypeError, match="formatted"):  # pybind11's refusal of an int for TRITONSERVER_MetricFormat
        server.metrics(5)


def test_load_refused_without_explicit_control(server):
    with pytest.raises(tritonserver.UnavailableError, match="explicit model load / unload is not allowed"):
        server.load("add_sub")
    with pytest.raises(tritonserver.UnsupportedError, match="not allowed if model control mode is not EXPLICIT"):
        server.register_model_repository(MODELS)


def _cupy():
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # noqa: BLE001 - not installed, or no driver/device
        return None


@pytest.mark.skipif(_cupy() is None, reason="needs cupy and a CUDA device")
def test_gpu_inputs_go_through_host_memory_and_outputs_can_come_back_on_the_gpu(server):
    """Device inputs reach the model in host memory (Triton's Python backend default); outputs land where the
    request asks."""
    cupy = _cupy()
    inputs = {"INPUT0": cupy.full((1, 4), 3.0, cupy.float32), "INPUT1": cupy.ones((1, 4), cupy.float32)}
    (response,) = list(server.model("add_sub").infer(inputs=inputs, output_memory_type="gpu"))
    output = response.outputs["OUTPUT0"]
    assert output.memory_type == tritonserver.MemoryType.GPU
    assert cupy.from_dlpack(output).tolist() == [[4.0] * 4]


def test_a_decoupled_models_error_response_is_handed_out_and_the_stream_goes_on():
    """As Triton's in-process API: an error response in a decoupled stream raises on the iterator's next() (with
    raise_on_error) or comes with `error` set, and the responses after it, the final one too, still come."""
    server = tritonserver.Server(model_repository=str(REPOSITORIES / "json_kinds"), exit_timeout=5,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                                 startup_models=["dec_probe"])
    server.start(wait_until_ready=True, timeout=60)
    try:
        case = {"CASE": numpy.array(["error_then_final"], dtype=numpy.object_)}
        got = []
        for response in server.model("dec_probe").infer(inputs=case, raise_on_error=False):
            out = response.outputs.get("OUT")
            got.append(("error", str(response.error)) if response.error is not None else
                       ("response", None if out is None else out.to_bytes_array()[0].decode(), response.final))
        assert got == [("response", "before", False), ("error", "boom"), ("response", "after", False),
                       ("response", None, True)]
        iterator = server.model("dec_probe").infer(inputs=case)
        assert next(iterator).final is False
        with pytest.raises(tritonserver.InternalError, match="boom"):
            next(iterator)
        assert [r.final for r in iterator] == [False, True]  # (it goes on after the error)
    finally:
        server.stop()
