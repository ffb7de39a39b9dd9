"""What a server does with callables that misbehave: outputs left out, exceptions (logged, and still answered)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from pytriton.backends._error_log import FULL_FAILURES
from tests._support.clients import CLIENTS, PROTOCOLS, client_for
from tests._support.serving import lazy_servers, serve, tensor_args

FP32_4 = tensor_args("input", [("INPUT", "fp32", "4")])
SERVERS = {
    "first_output_only": ("tests.models:first_output_only",
                          FP32_4 + tensor_args("output", [("OUTPUT0", "fp32", "4"), ("OUTPUT1", "fp32", "4")])),
    "raises": ("tests.models:raises", FP32_4 + tensor_args("output", [("OUTPUT", "fp32", "4")])),
}
PREFIX = (re.escape("Failed to process the request(s) for model '") + r"[^']*"
          + re.escape("', message: "))


@pytest.fixture(scope="module")
def servers():
    yield from lazy_servers(SERVERS)


def fp32_input(mod):
    tensor = mod.InferInput("INPUT", [4], "FP32")
    tensor.set_data_from_numpy(np.arange(4, dtype=np.float32))
    return [tensor]


def error_of(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        call()
    return info.value


# ---- outputs the callable did not produce ----------------------------------------------------------------------

@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_declared_output_missing_when_none_listed(servers, protocol):
    """A request that lists no outputs asks for all the model declares: one left out is an error (it was success
    with the output absent: HTTP `"outputs": []`-like answers, None from the gRPC client's as_numpy)."""
    mod, client = CLIENTS[protocol], client_for(servers["first_output_only"], protocol)
    err = error_of(lambda: client.infer("first_output_only", fp32_input(mod)))
    assert err.status() == ("StatusCode.INTERNAL" if protocol == "grpc" else "500")
    assert re.fullmatch(
        PREFIX + re.escape("inference callable of model 'first_output_only' did not return output 'OUTPUT1' (the "
                           "request lists no outputs, so every output the model declares is expected)"),
        err.message(),
    ), err.message()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_requested_output_missing(servers, protocol):
    mod, client = CLIENTS[protocol], client_for(servers["first_output_only"], protocol)
    for wanted in (["OUTPUT1"], ["OUTPUT0", "OUTPUT1"]):
        outputs = [mod.InferRequestedOutput(name) for name in wanted]
        err = error_of(lambda outputs=outputs: client.infer("first_output_only", fp32_input(mod), outputs=outputs))
        assert re.fullmatch(
            PREFIX + re.escape("inference callable of model 'first_output_only' did not return requested output "
                               "'OUTPUT1'"),
            err.message(),
        ), err.message()
    # what it does return can be asked for
    result = client.infer("first_output_only", fp32_input(mod), outputs=[mod.InferRequestedOutput("OUTPUT0")])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.arange(4, dtype=np.float32) * 2)
    assert result.as_numpy("OUTPUT1") is None


# ---- exceptions -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_exception_reaches_the_client(servers, protocol):
    mod, client = CLIENTS[protocol], client_for(servers["raises"], protocol)
    err = error_of(lambda: client.infer("raises", fp32_input(mod)))
    assert err.status() == ("StatusCode.INTERNAL" if protocol == "grpc" else "500")
    assert re.fullmatch(PREFIX + "ValueError: the callable failed on purpose", err.message()), err.message()


def test_exception_is_logged_with_traceback_rate_limited():
    """At the default log level, the first failures are logged with their traceback, then at most one per minute;
    every client still gets its error."""
    with serve("tests.models:raises", *SERVERS["raises"][1]) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        for _ in range(FULL_FAILURES + 4):
            err = error_of(lambda: client.infer("raises", fp32_input(grpcclient)))
            assert "ValueError: the callable failed on purpose" in err.message()
        assert server.wait_for_log(f"(failure {FULL_FAILURES}; further failures are logged at most once per 60 s)")
    # Read once the server has stopped: its output is read to the end, with every line its workers wrote before they
    # exited (a worker's lines reach it a little after the answers; no guessed wait for them).
    log = server.log
    logged = re.findall(r"ERROR worker\[\d+\] pytriton\.backends: model 'raises' instance 0: inference callable "
                        r"failed \(failure (\d+)[^)]*\): ValueError: the callable failed on purpose", log)
    assert logged == [str(n) for n in range(1, FULL_FAILURES + 1)]
    assert log.count("Traceback (most recent call last)") == FULL_FAILURES
    assert log.count('raise ValueError("the callable failed on purpose")') == FULL_FAILURES  # the callable's line
