"""BLS call chains (tests/repositories/bls_cycle: relays ping and pong with one instance each, twin with two, and the
ensemble ring whose step is ping): a call back into a model whose only instances wait for it fails at once naming the
cycle, directly, through another model or through an ensemble, while recursion onto a free instance works; and a
wedge the chain cannot see (two executions waiting for each other's model) shows in the pending and stall gauges and
in readiness. Checked with tritonclient over gRPC and HTTP."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve
from tests._support.waits import wait_until

REPOS = REPO / "tests" / "repositories"
X = np.array([1.0, 2.0], dtype=np.float32)
# Before call chains a cycle hung for good; a client deadline keeps such a failure from hanging the test run.
DEADLINE_S = 20


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPOS / "bls_cycle")) as running:
        yield running


def relay(server, protocol: str, model: str, route: str, **parameters: str) -> np.ndarray:
    module = CLIENTS[protocol]
    x = module.InferInput("X", [2], "FP32")
    x.set_data_from_numpy(X)
    extra = {"client_timeout": DEADLINE_S} if protocol == "grpc" else {}
    client = client_for(server, protocol, **({} if protocol == "grpc" else {"network_timeout": DEADLINE_S}))
    result = client.infer(model, [x], parameters={"route": route, **parameters}, **extra)
    return result.as_numpy("Y")


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_cycle_through_another_model_fails_at_once_naming_it(server, protocol):
    """ping -> pong -> ping, one instance each: ping's only instance waits for the last call."""
    with pytest.raises(InferenceServerException) as info:
        relay(server, protocol, "ping", "pong,ping")
    message = info.value.message()
    assert ("pong: Model pong - Error when running inference: ping: Model ping - Error when running inference: BLS "
            "call cycle: 'ping' -> 'pong' -> 'ping': model 'ping' has no free instance (instance 'ping_0_0' waits for "
            "this call)") in message, message


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_model_calling_itself_with_one_instance_fails_at_once(server, protocol):
    with pytest.raises(InferenceServerException) as info:
        relay(server, protocol, "pong", "pong")
    assert ("pong: Model pong - Error when running inference: BLS call cycle: 'pong' -> 'pong': model 'pong' has no "
            "free instance") in info.value.message()


def test_a_cycle_through_an_ensemble_fails_at_once_naming_it(server):
    """ping -> ring (an ensemble whose step is ping) -> ping."""
    with pytest.raises(InferenceServerException) as info:
        relay(server, "grpc", "ping", "ring")
    message = info.value.message()
    assert "BLS call cycle: 'ping' -> 'ring' -> 'ping': model 'ping' has no free instance" in message, message


def test_an_ensemble_whose_step_calls_back_into_it_fails_at_once(server):
    """ring (step ping) -> ping -> ring -> ping: the step's instance waits for the last call."""
    with pytest.raises(InferenceServerException) as info:
        relay(server, "grpc", "ring", "ring")
    message = info.value.message()
    assert "BLS call cycle: 'ping' -> 'ring' -> 'ping': model 'ping' has no free instance" in message, message


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_recursion_onto_a_free_instance_runs(server, protocol):
    """twin has two instances: calling itself once runs on the other one; a third level finds both waiting."""
    np.testing.assert_array_equal(relay(server, protocol, "twin", "twin"), X + 2)
    np.testing.assert_array_equal(relay(server, protocol, "ping", "twin,pong"), X + 3)
    with pytest.raises(InferenceServerException) as info:
        relay(server, protocol, "twin", "twin,twin")
    message = info.value.message()
    assert ("BLS call cycle: 'twin' -> 'twin' -> 'twin': model 'twin' has no free instance (instances 'twin_0_0', "
            "'twin_0_1' wait for this call)") in message, message


def test_the_models_serve_on_after_the_cycles(server):
    """The cycles above left nothing behind: no call waits, no instance is held."""
    for protocol in ("grpc", "http"):
        np.testing.assert_array_equal(relay(server, protocol, "ping", "pong"), X + 2)
        np.testing.assert_array_equal(relay(server, protocol, "pong", ""), X + 1)
    metrics = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    assert _gauge(metrics, "nv_inference_pending_request_count", "ping") == 0
    assert _gauge(metrics, "pytriton_model_executions_in_flight", "ping") == 0


def _gauge(text: str, name: str, model: str) -> float:
    values = re.findall(rf'^{name}\{{model="{model}",version="1"\}} (\S+)$', text, re.M)
    assert len(values) == 1, (name, model, text)
    return float(values[0])


def test_a_wedge_shows_in_the_gauges_and_in_readiness(tmp_path: Path):
    """ping (running a request for client 1) calls pong while pong (running one for client 2) calls ping: neither
    chain holds the other model, so both calls wait — each behind the execution that waits for the other. The calls
    count as pending, the executions show their stall, and both models (and the server) report not ready."""
    gate = tmp_path / "gate"
    with serve("--model-repository", str(REPOS / "bls_cycle"), "--exit-timeout", "2",
               env={"PYTRITON_MODEL_STALL_SECS": "0.5"}) as running:
        client = grpcclient.InferenceServerClient(running.grpc_url)
        answers: list[object] = []
        x = grpcclient.InferInput("X", [2], "FP32")
        x.set_data_from_numpy(X)
        for model, other in (("ping", "pong"), ("pong", "ping")):
            client.async_infer(model, [x], callback=lambda result, error: answers.append(error),
                               parameters={"route": other, "started": str(tmp_path / model), "gate": str(gate)})
        wait_until(lambda: (tmp_path / "ping").exists() and (tmp_path / "pong").exists(), "both executions started")
        assert client.is_model_ready("ping") and client.is_server_ready()  # nobody waits yet
        gate.touch()

        def scrape() -> str:
            return urllib.request.urlopen(running.metrics_url, timeout=10).read().decode()

        wait_until(lambda: all(_gauge(scrape(), "nv_inference_pending_request_count", m) == 1
                               for m in ("ping", "pong")),
                   "each model's pending gauge counting the BLS call waiting for it")
        wait_until(lambda: not client.is_model_ready("ping") and not client.is_model_ready("pong"),
                   "both models reporting not ready")
        assert not client.is_server_ready()
        metrics = scrape()
        for model in ("ping", "pong"):
            assert _gauge(metrics, "pytriton_model_executions_in_flight", model) == 1
            assert _gauge(metrics, "pytriton_model_execution_stall_seconds", model) >= 0.5
        assert answers == []  # (still wedged: the stop below fails them)
        client.close()
