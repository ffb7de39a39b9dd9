"""What `pytriton serve` says about flags that do not fit: batcher settings, datatypes, versions, the help text; and
the response-cache warning (the cache is not there yet)."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from click.testing import CliRunner

from pytriton.cli.serve import main
from pytriton.exceptions import PyTritonModelConfigError, PyTritonValidationError
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor, triton_model
from tests._support.ports import LOCAL_PORTS
from tests._support.serving import serve

IDENTITY = ["tests.models:identity", "--input", "IN:int32:-1", "--output", "OUT:int32:-1"]


def _invoke(*args: str):
    return CliRunner().invoke(main, ["serve", *args, *LOCAL_PORTS])


@pytest.mark.parametrize("args, message", [
    (["--max-batch-size", "8", "--preferred-batch-size", "16"],
     "Error: dynamic batching preferred size must be <= max batch size for identity (preferred_batch_size [16], "
     "max_batch_size 8)"),
    (["--max-queue-delay-us", "5000", "--preferred-batch-size", "4"],
     "Error: --max-queue-delay-us and --preferred-batch-size set the dynamic batcher, and model 'identity' does not "
     "batch (max_batch_size 0): give --max-batch-size > 0"),
    (["--max-batch-size", "8", "--no-dynamic-batching", "--max-queue-delay-us", "10"],
     "Error: --max-queue-delay-us sets the dynamic batcher, which --no-dynamic-batching turns off: drop one or the "
     "other"),
])
def test_batcher_flags_that_do_not_fit_are_refused(args, message):
    result = _invoke(*IDENTITY, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_batcher_flags_turn_dynamic_batching_on():
    """As in Triton's config, where both live inside dynamic_batching: giving them means a dynamic batcher."""
    with serve("tests.cli_targets.declared:double", "--max-queue-delay-us", "5000", "--preferred-batch-size",
               "4") as server:
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            config = client.get_model_config("declared_double", as_json=True)["config"]
        assert config["max_batch_size"] == 4
        assert config["dynamic_batching"]["max_queue_delay_microseconds"] == "5000"
        assert config["dynamic_batching"]["preferred_batch_size"] == [4]


def test_a_declared_preferred_batch_size_over_max_batch_size_is_refused():
    with pytest.raises(PyTritonValidationError) as raised:
        triton_model(inputs=[Tensor(name="X", dtype=np.float32, shape=(1,))],
                     outputs=[Tensor(name="Y", dtype=np.float32, shape=(1,))], name="big",
                     config=ModelConfig(max_batch_size=8, batcher=DynamicBatcher(preferred_batch_size=[4, 16])))
    assert str(raised.value) == ("@triton_model(name='big'): dynamic batching preferred size must be <= max batch size "
                                 "for big (preferred_batch_size [4, 16], max_batch_size 8)")


def test_a_bound_preferred_batch_size_over_max_batch_size_is_refused():
    from pytriton.server.bound_model import BoundModel

    with pytest.raises(PyTritonModelConfigError, match="dynamic batching preferred size must be <= max batch size "
                                                       "for bound"):
        BoundModel("bound", lambda requests: requests, [Tensor(name="X", dtype=np.float32, shape=(1,))],
                   [Tensor(name="Y", dtype=np.float32, shape=(1,))], 1,
                   ModelConfig(max_batch_size=2, batcher=DynamicBatcher(preferred_batch_size=[3])), False)


@pytest.mark.parametrize("args, message", [
    (["--input", "X:fp23:-1"],
     "Error: Invalid value for --input 'X:fp23:-1': input 'X': unknown datatype 'fp23'; use a Triton name"),
    (["--output", "Y:int32:a"],
     "Error: Invalid value for --output 'Y:int32:a': shape of output 'Y' must be comma-separated integers, got 'a'"),
    (["--model-version", "-3"], "Error: Invalid value for '--model-version': -3 is not in the range x>=0."),
])
def test_messages_name_the_option_and_the_tensor(args, message):
    result = _invoke("tests.models:identity", *args)
    assert result.exit_code == 2
    assert message in result.output


def test_a_shape_that_is_not_a_tuple_is_a_declaration_mistake():
    with pytest.raises(PyTritonValidationError) as raised:
        triton_model(inputs=[Tensor(name="X", dtype=np.float32, shape=16)],
                     outputs=[Tensor(name="Y", dtype=np.float32, shape=(16,))])
    assert str(raised.value) == ("@triton_model: input 'X': shape must be a tuple of ints without the batch dimension "
                                 "(-1: variable), e.g. shape=(16,), got 16")


def test_the_help_is_consistent():
    text = " ".join(CliRunner().invoke(main, ["serve", "--help"], terminal_width=400).output.split())
    assert "--log-level [debug|info|warning|error] Least severe messages logged (any case). [default: info]" in text
    assert "--model-version INTEGER RANGE The version the model is served as" in text
    assert "--device [cpu|gpu]" in text
    assert "bounded once decompressed by --grpc-max-decompressed-bytes" in text
    assert "uncompressed messages are bounded by --grpc-max-message-bytes alone" in text
    assert "turns dynamic batching on" in text


def test_log_level_takes_any_case():
    result = _invoke("tests.models:identity", "--log-level", "DEBUG")
    assert "declares no outputs" in result.output  # got past the option


def test_a_response_cache_without_a_server_cache_is_reported_as_given_with_one_warning():
    with serve("tests.cli_targets.declared:cached") as server:
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            config = client.get_model_config("cached", as_json=True)["config"]
        assert config["response_cache"] == {"enable": True}
        warning = ("model 'cached': response_cache is enabled but the server has no cache (--cache-config "
                   "local,size=BYTES): every request is computed")
        assert server.log.count(warning) == 1, server.log
