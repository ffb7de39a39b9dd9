"""Implicit state of the sequence batcher (`sequence_batching.state`) through tritonclient, on repository models
(tests/repositories/implicit_state) and a bound callable: the server keeps each sequence's state output and hands it
back as the state input of the sequence's next request; the client sees neither, unless the config lists the state
output as an output."""

from __future__ import annotations


import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPO / "tests" / "repositories" / "implicit_state")) as s:
        yield s


def client_of(server, protocol):
    return CLIENTS[protocol], client_for(server, protocol)


def send(module, client, model, value, sequence_id, shape=(1, 1), outputs=None, **flags):
    tensor = module.InferInput("INPUT", list(shape), "INT32")
    tensor.set_data_from_numpy(np.full(shape, value, dtype=np.int32))
    requested = None if outputs is None else [module.InferRequestedOutput(name) for name in outputs]
    return client.infer(model, [tensor], outputs=requested, sequence_id=sequence_id, **flags)


def names(result) -> set[str]:
    response = result.get_response()
    return {o["name"] for o in response["outputs"]} if isinstance(response, dict) else {
        o.name for o in response.outputs}


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_two_interleaved_sequences_accumulate_in_the_servers_state_on_two_instances(server, protocol):
    module, client = client_of(server, protocol)
    base = 10 if protocol == "grpc" else 20
    a, b = base + 1, base + 2
    steps = [(a, 1, True, False), (b, 100, True, False), (a, 2, False, False), (b, 200, False, False),
             (a, 3, False, True), (b, 300, False, True)]
    seen = {a: [], b: []}
    pids = {a: set(), b: set()}
    for sequence, value, start, end in steps:
        result = send(module, client, "state_accumulator", value, sequence, sequence_start=start, sequence_end=end)
        seen[sequence].append((int(result.as_numpy("GOT_STATE").reshape(-1)[0]),
                               int(result.as_numpy("OUTPUT").reshape(-1)[0])))
        pids[sequence].add(int(result.as_numpy("PID").reshape(-1)[0]))
        assert names(result) == {"OUTPUT", "GOT_STATE", "PID"}  # the state output is not the client's
    assert seen[a] == [(0, 1), (1, 3), (3, 6)]
    assert seen[b] == [(0, 100), (100, 300), (300, 600)]
    assert len(pids[a]) == len(pids[b]) == 1 and pids[a] != pids[b]  # each on its own instance
    # ended: the same ids start again from the initial state
    assert int(send(module, client, "state_accumulator", 7, a, sequence_start=True,
                    sequence_end=True).as_numpy("OUTPUT").reshape(-1)[0]) == 7
    client.close()


def test_a_client_cannot_send_the_state_input(server):
    module, client = client_of(server, "grpc")
    tensors = []
    for name in ("INPUT", "INPUT_STATE"):
        tensor = module.InferInput(name, [1, 1], "INT32")
        tensor.set_data_from_numpy(np.array([[5]], dtype=np.int32))
        tensors.append(tensor)
    with pytest.raises(InferenceServerException, match="expected 1 inputs but got 2 inputs for model 'state_accumulator'"):
        client.infer("state_accumulator", tensors, sequence_id=31, sequence_start=True)
    client.close()


def test_a_state_listed_as_an_output_is_shown_when_asked_and_starts_from_the_initial_state_file(server):
    module, client = client_of(server, "http")
    first = send(module, client, "state_visible", 5, 41, shape=(1,), sequence_start=True)
    assert first.as_numpy("OUTPUT").tolist() == [105]  # 100 from initial_state/hundred
    assert first.as_numpy("OUTPUT_STATE").tolist() == [105, 100]
    second = send(module, client, "state_visible", 1, 41, shape=(1,), outputs=["OUTPUT"])
    assert names(second) == {"OUTPUT"} and second.as_numpy("OUTPUT").tolist() == [106]
    third = send(module, client, "state_visible", 1, 41, shape=(1,), outputs=["OUTPUT_STATE"], sequence_end=True)
    assert third.as_numpy("OUTPUT_STATE").tolist() == [107, 106, 105, 100]  # (a state that grows)
    client.close()


def test_an_idle_sequence_is_released_with_its_state(server):
    module, client = client_of(server, "grpc")
    send(module, client, "state_visible", 5, 51, shape=(1,), sequence_start=True)
    assert send(module, client, "state_visible", 5, 51, shape=(1,)).as_numpy("OUTPUT").tolist() == [110]
    # The idle time must pass (that is what is tested); the test waits for the release itself, not for a guess.
    assert server.wait_for_log("sequence 51 of model 'state_visible' idle for more than"), server.log
    with pytest.raises(InferenceServerException, match="sequence 51 to model 'state_visible' must specify the START"):
        send(module, client, "state_visible", 1, 51, shape=(1,))
    restarted = send(module, client, "state_visible", 1, 51, shape=(1,), sequence_start=True, sequence_end=True)
    assert restarted.as_numpy("OUTPUT_STATE").tolist() == [101, 100]
    config = client.get_model_config("state_visible", as_json=True)["config"]["sequence_batching"]["state"][0]
    assert (config["input_name"], config["output_name"], config["dims"]) == ("INPUT_STATE", "OUTPUT_STATE", ["-1"])
    client.close()
