"""The sequence batcher for a callable served by `pytriton serve` with --sequence-batching, and the same settings
through `ModelConfig(sequence_batcher=...)` of `Triton.bind`."""

from __future__ import annotations

import numpy as np
import tritonclient.http as httpclient

from pytriton.model_config import ModelConfig, SequenceBatcher, SequenceControl, SequenceStrategy, Tensor
from pytriton.model_config.sequence import ControlKind
from tests._support.serving import serve, tensor_args

ARGS = [
    *tensor_args("input", [("INPUT", "int32", "1")]),
    *tensor_args("output", [("SUM", "int32", "1"), ("OUT_START", "int32", "1"), ("CORRELATION_ID", "bytes", "1")]),
    "--max-batch-size", "2", "--sequence-batching", "oldest", "--max-candidate-sequences", "2",
    "--sequence-control", "start=START:bool", "--sequence-control", "corrid=CORRID:string",
    "--sequence-idle-us", "5000000",
]


def test_a_callable_served_with_cli_sequence_options():
    with serve("tests.sequence_models:running_sum", *ARGS) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        config = client.get_model_config("running_sum")
        batcher = config["sequence_batching"]
        assert batcher["max_sequence_idle_microseconds"] == 5000000
        assert batcher["oldest"]["max_candidate_sequences"] == 2
        start, corrid = batcher["control_input"]  # (every field shown, as Triton's HTTP config does)
        assert start["name"] == "START" and start["control"][0]["kind"] == "CONTROL_SEQUENCE_START"
        assert start["control"][0]["bool_false_true"] == [False, True]
        assert corrid["name"] == "CORRID" and corrid["control"][0]["kind"] == "CONTROL_SEQUENCE_CORRID"
        assert corrid["control"][0]["data_type"] == "TYPE_STRING"
        assert "dynamic_batching" not in config
        sums = []
        for index, value in enumerate([4, 5, 6]):
            tensor = httpclient.InferInput("INPUT", [1, 1], "INT32")
            tensor.set_data_from_numpy(np.array([[value]], dtype=np.int32))
            result = client.infer("running_sum", [tensor], sequence_id="s-1", sequence_start=index == 0,
                                  sequence_end=index == 2)
            sums.append(int(result.as_numpy("SUM")[0][0]))
            assert int(result.as_numpy("OUT_START")[0][0]) == (index == 0)
            assert result.as_numpy("CORRELATION_ID")[0][0] == b"s-1"
        assert sums == [4, 9, 15]


def test_model_config_carries_the_sequence_batcher_to_the_served_config():
    from pytriton.triton import _BoundModel

    policy = SequenceBatcher(SequenceStrategy.DIRECT, 2000, (SequenceControl(ControlKind.READY, "R", "FP32", (0, 1)),))
    bound = _BoundModel("m", lambda requests: requests, [Tensor(name="X", shape=(1,), dtype=np.float32)],
                        [Tensor(name="Y", shape=(1,), dtype=np.float32)], 1, ModelConfig(sequence_batcher=policy),
                        False)
    shown = bound.config.to_triton_dict()
    assert "dynamic_batching" not in shown
    assert shown["sequence_batching"]["control_input"] == [
        {"name": "R", "control": [{"kind": "CONTROL_SEQUENCE_READY", "fp32_false_true": [0, 1]}]}]
    assert shown["sequence_batching"]["direct"] == {"max_queue_delay_microseconds": 0, "minimum_slot_utilization": 0.0}


def test_a_callable_with_implicit_state_from_the_command_line(tmp_path):
    initial = tmp_path / "ten"
    initial.write_bytes(np.array([10], dtype=np.int32).tobytes())
    args = [*tensor_args("input", [("INPUT", "int32", "1")]), *tensor_args("output", [("SUM", "int32", "1")]),
            "--max-batch-size", "2", "--sequence-batching", "direct", "--instances", "2",
            "--sequence-state", f"STATE_IN=STATE_OUT:int32:1:{initial}"]
    with serve("tests.sequence_models:state_sum", *args) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        state = client.get_model_config("state_sum")["sequence_batching"]["state"][0]
        assert (state["input_name"], state["output_name"], state["data_type"]) == ("STATE_IN", "STATE_OUT",
                                                                                     "TYPE_INT32")
        sums: dict[str, list[int]] = {"a": [], "b": []}
        for index, (sequence, value) in enumerate([("a", 1), ("b", 5), ("a", 2), ("b", 6), ("a", 3), ("b", 7)]):
            tensor = httpclient.InferInput("INPUT", [1, 1], "INT32")
            tensor.set_data_from_numpy(np.array([[value]], dtype=np.int32))
            result = client.infer("state_sum", [tensor], sequence_id=sequence, sequence_start=index < 2,
                                  sequence_end=index >= 4)
            sums[sequence].append(int(result.as_numpy("SUM")[0][0]))
            assert [o["name"] for o in result.get_response()["outputs"]] == ["SUM"]
        assert sums == {"a": [11, 13, 16], "b": [15, 21, 28]}


def test_model_config_carries_implicit_state():
    from pytriton.model_config import SequenceState
    from pytriton.triton import _BoundModel

    policy = SequenceBatcher(states=(SequenceState("S_IN", "S_OUT", "FP32", (-1,), (2,), None),))
    bound = _BoundModel("m", lambda requests: requests, [Tensor(name="X", shape=(1,), dtype=np.float32)],
                        [Tensor(name="Y", shape=(1,), dtype=np.float32)], 1, ModelConfig(sequence_batcher=policy),
                        False)
    state = bound.config.to_triton_dict()["sequence_batching"]["state"][0]
    assert state["initial_state"] == [{"data_type": "TYPE_FP32", "dims": ["2"], "name": "initial state",
                                       "zero_data": True}]
    assert bound.config.model_output_by_name["S_OUT"].shape == (-1,)
    assert "S_OUT" not in bound.config.output_by_name
