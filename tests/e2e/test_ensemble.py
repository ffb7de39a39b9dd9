"""Ensembles (platform "ensemble") of Python-backend models from tests/repositories/ensembles, served with
`--model-repository` and checked with the real tritonclient over gRPC and HTTP: a two-step pipeline, a diamond with
independent steps and a BYTES branch, a step's error reaching the client, metadata/config/statistics as Triton
shows them, and the zero-copy hand-over of a step's output to the next step (it reads the previous step's response
arena)."""

from __future__ import annotations

import concurrent.futures
import re
import shutil
import subprocess
import sys
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve

REPOS = REPO / "tests" / "repositories"


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPOS / "ensembles")) as s:
        yield s


def tensor(protocol: str, name: str, array: np.ndarray, datatype: str = "FP32"):
    t = CLIENTS[protocol].InferInput(name, list(array.shape), datatype)
    t.set_data_from_numpy(array)
    return t


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_pipeline_runs_both_steps(server, protocol):
    client = client_for(server, protocol)
    x = np.arange(5, dtype=np.float32)
    result = client.infer("pipeline", [tensor(protocol, "X", x)])
    np.testing.assert_array_equal(result.as_numpy("Y"), (x + 1) * 2)
    assert client.is_model_ready("pipeline")


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_diamond_with_independent_steps_and_bytes(server, protocol):
    client = client_for(server, protocol)
    x = np.array([1, 2, 3], dtype=np.float32)
    text = np.array([b"abc", b"\x00\xffz", b""], dtype=np.object_)
    outputs = [CLIENTS[protocol].InferRequestedOutput("Y"), CLIENTS[protocol].InferRequestedOutput("REVERSED")]
    result = client.infer("diamond", [tensor(protocol, "X", x), tensor(protocol, "TEXT", text, "BYTES")],
                          outputs=outputs)
    np.testing.assert_array_equal(result.as_numpy("Y"), (x + 1) + 2 * x)
    assert list(result.as_numpy("REVERSED")) == [b"cba", b"z\xff\x00", b""]


def test_an_ensemble_as_a_step(server):
    client = client_for(server, "http")
    x = np.array([0.5, 2], dtype=np.float32)
    np.testing.assert_array_equal(client.infer("nested", [tensor("http", "X", x)]).as_numpy("Y"), (x + 2) * 2)
    with pytest.raises(InferenceServerException) as error:
        client.infer("nested", [tensor("http", "X", np.array([-5.0], dtype=np.float32))])
    assert "in ensemble 'nested', " in error.value.message() and "refuses negative values" in error.value.message()
    stats = client.get_inference_statistics("pipeline")["model_stats"][0]
    assert stats["inference_stats"]["success"]["count"] >= 1  # the inner ensemble counts its own requests


def test_requests_to_an_ensemble_are_batched_by_the_step_models_dynamic_batcher(server):
    client = client_for(server, "grpc")
    x = np.array([[1, 2]], dtype=np.float32)

    def one(_):
        result = client.infer("batched", [tensor("grpc", "X", x)])
        np.testing.assert_array_equal(result.as_numpy("Y"), x * 10)
        return int(result.as_numpy("REQUESTS")[0][0])

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        together = list(pool.map(one, range(6)))
    assert max(together) > 1, together


def test_only_the_requested_output_is_answered(server):
    client = client_for(server, "grpc")
    x = np.ones(3, dtype=np.float32)
    result = client.infer("diamond", [tensor("grpc", "X", x), tensor("grpc", "TEXT", np.array([b"a"], np.object_),
                                                                     "BYTES")],
                          outputs=[grpcclient.InferRequestedOutput("REVERSED")])
    assert [o.name for o in result.get_response().outputs] == ["REVERSED"]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_step_error_reaches_the_client(server, protocol):
    client = client_for(server, protocol)
    with pytest.raises(InferenceServerException) as error:
        client.infer("pipeline", [tensor(protocol, "X", np.array([-1.0], dtype=np.float32))])
    assert "in ensemble 'pipeline'" in error.value.message()
    assert "ens_plus_one refuses negative values" in error.value.message()
    # the server goes on serving
    result = client.infer("pipeline", [tensor(protocol, "X", np.array([1.0], dtype=np.float32))])
    np.testing.assert_array_equal(result.as_numpy("Y"), [4.0])


def test_a_bad_request_names_the_ensemble(server):
    with pytest.raises(InferenceServerException) as error:
        client_for(server, "grpc").infer("pipeline", [tensor("grpc", "X", np.ones(2, dtype=np.int32), "INT32")])
    assert "pipeline" in error.value.message()
    assert "INT32" in error.value.message() or "data-type" in error.value.message()


@pytest.mark.parametrize("size", [300_000, 5_000_000])  # a slot of a shared segment, and a dedicated segment
def test_a_large_intermediate_tensor_is_read_where_the_previous_step_wrote_it(server, size):
    """ens_times_two reports the shared-memory file its input lies in: ens_plus_one's response arena (a worker's
    "rsp" segment), not the server's request arena ("req"): the server handed the tensor on without copying it."""
    client = client_for(server, "grpc")
    x = np.random.default_rng(0).random(size, dtype=np.float32)
    result = client.infer("pipeline", [tensor("grpc", "X", x)])
    np.testing.assert_allclose(result.as_numpy("Y"), (x + 1) * 2, rtol=1e-6)
    source = result.as_numpy("SOURCE")[0].decode()
    match = re.fullmatch(r"/dev/shm/pytriton_[0-9a-f]+_(\d+)_([a-z]+)\d+", source)
    assert match is not None, source
    assert match.group(2) == "rsp", source
    assert int(match.group(1)) in server.worker_pids(), (source, server.worker_pids())


def test_a_bls_call_hands_a_large_tensor_to_the_callee_without_a_copy(server):
    """The same hand-over for a BLS request: the callee reads the caller's response arena."""
    client = client_for(server, "grpc")
    result = client.infer("bls_handoff", [tensor("grpc", "X", np.zeros(300_000, dtype=np.float32))])
    source = result.as_numpy("SOURCE")[0].decode()
    match = re.fullmatch(r"/dev/shm/pytriton_[0-9a-f]+_(\d+)_rsp\d+", source)
    assert match is not None and int(match.group(1)) in server.worker_pids(), source


def test_client_shared_memory_in_and_out(server):
    """An ensemble input in a client's region goes to the step that reads it; an output requested into a region is
    written there by the step that produces it."""
    client = client_for(server, "http")
    source = shm.create_shared_memory_region("ens_in", "/ens_in", 8)
    target = shm.create_shared_memory_region("ens_out", "/ens_out", 64)
    try:
        shm.set_shared_memory_region(source, [np.array([5, 6], np.float32)])
        client.register_system_shared_memory("ens_in", "/ens_in", 8)
        client.register_system_shared_memory("ens_out", "/ens_out", 64)
        x = httpclient.InferInput("X", [2], "FP32")
        x.set_shared_memory("ens_in", 8)
        y = httpclient.InferRequestedOutput("Y", binary_data=True)
        y.set_shared_memory("ens_out", 8)
        result = client.infer("pipeline", [x], outputs=[y])
        assert result.get_output("Y")["shape"] == [2] and "data" not in result.get_output("Y")  # (not in the body)
        np.testing.assert_array_equal(shm.get_contents_as_numpy(target, np.float32, [2]), [12.0, 14.0])
    finally:
        client.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(source)
        shm.destroy_shared_memory_region(target)


def test_metadata_and_config_show_an_ensemble(server):
    client = client_for(server, "grpc")
    metadata = client.get_model_metadata("pipeline", as_json=True)
    assert metadata["platform"] == "ensemble"
    assert [i["name"] for i in metadata["inputs"]] == ["X"]
    assert [o["name"] for o in metadata["outputs"]] == ["Y", "SOURCE"]
    config = client.get_model_config("pipeline", as_json=True)["config"]
    assert config["platform"] == "ensemble"
    assert config.get("backend", "") == ""
    assert config.get("instance_group", []) == []
    steps = config["ensemble_scheduling"]["step"]
    assert [s["model_name"] for s in steps] == ["ens_plus_one", "ens_times_two"]
    assert steps[0]["input_map"] == {"INPUT0": "X"}
    assert steps[1]["output_map"] == {"OUTPUT0": "Y", "SOURCE": "SOURCE"}
    http_config = client_for(server, "http").get_model_config("pipeline")
    assert http_config["platform"] == "ensemble"
    assert http_config["ensemble_scheduling"]["step"][0] == {  # as tritonserver 2.51 shows it
        "model_name": "ens_plus_one", "model_version": -1, "input_map": {"INPUT0": "X"},
        "output_map": {"OUTPUT0": "T"}, "model_namespace": ""}
    assert "optimization" not in http_config and http_config["default_model_filename"] == ""


def test_statistics_count_the_ensemble_and_its_steps(server):
    client = client_for(server, "grpc")

    def counts(name):
        stats = client.get_inference_statistics(name, as_json=True)["model_stats"][0]
        return int(stats["inference_stats"]["success"].get("count", 0)), int(stats.get("execution_count", 0))

    before = {name: counts(name) for name in ("pipeline", "ens_plus_one", "ens_times_two")}
    for _ in range(3):
        client.infer("pipeline", [tensor("grpc", "X", np.ones(2, dtype=np.float32))])
    after = {name: counts(name) for name in before}
    assert after["pipeline"][0] - before["pipeline"][0] == 3
    assert after["pipeline"][1] - before["pipeline"][1] == 3
    assert after["ens_plus_one"][0] - before["ens_plus_one"][0] == 3
    assert after["ens_times_two"][0] - before["ens_times_two"][0] == 3
    stats = client.get_inference_statistics("pipeline", as_json=True)["model_stats"][0]
    assert int(stats["inference_stats"]["compute_infer"]["ns"]) > 0  # the sum of its steps'
    with urllib.request.urlopen(server.metrics_url) as answer:
        metrics = answer.read().decode()
    line = next(l for l in metrics.splitlines() if l.startswith('nv_inference_request_success{model="pipeline"'))
    assert float(line.split()[-1]) == after["pipeline"][0]


def test_a_request_the_ensemble_refuses_is_no_failure_of_its_own(server):
    """As Triton: a request refused before it is scheduled (its input's datatype here) counts in no statistics, an
    ensemble's as any model's; a step's failure counts as the ensemble's."""
    client = client_for(server, "grpc")

    def failures() -> int:
        stats = client.get_inference_statistics("pipeline", as_json=True)["model_stats"][0]
        return int(stats["inference_stats"]["fail"].get("count", 0))

    before = failures()
    with pytest.raises(InferenceServerException, match="data-type is 'INT32'"):
        client.infer("pipeline", [tensor("grpc", "X", np.ones(2, dtype=np.int32), "INT32")])
    assert failures() == before


def ready_names(client) -> set[str]:
    return {m["name"] for m in client.get_model_repository_index(as_json=True).get("models", [])
            if m.get("state") == "READY"}


def test_explicit_mode_loads_the_steps_of_an_ensemble_and_unload_dependents_unloads_them():
    """As Triton: loading an ensemble loads the models of its steps from the repository; unloading it with
    unload_dependents unloads those it loaded (not a step model loaded by name); an ensemble whose step is unloaded
    is not ready."""
    with serve("--model-repository", str(REPOS / "ensembles"), "--model-control-mode", "explicit",
               "--load-model", "ens_text") as s:
        client = grpcclient.InferenceServerClient(s.grpc_url)
        assert ready_names(client) == {"ens_text"}
        client.load_model("diamond")
        assert ready_names(client) == {"diamond", "ens_plus_one", "ens_times_two", "ens_sum", "ens_text"}
        x = np.array([1.0], dtype=np.float32)
        inputs = [tensor("grpc", "X", x), tensor("grpc", "TEXT", np.array([b"ab"], np.object_), "BYTES")]
        np.testing.assert_array_equal(client.infer("diamond", inputs).as_numpy("Y"), [4.0])

        client.unload_model("ens_sum")  # a step gone: the ensemble is not ready and says why a request fails
        assert not client.is_model_ready("diamond")
        with pytest.raises(InferenceServerException) as error:
            client.infer("diamond", inputs)
        assert "in ensemble 'diamond'" in error.value.message() and "ens_sum" in error.value.message()
        client.load_model("ens_sum")
        assert client.is_model_ready("diamond")

        client.unload_model("diamond", unload_dependents=True)
        assert ready_names(client) == {"ens_text", "ens_sum"}  # (loaded by name: kept)


def test_an_ensemble_whose_step_is_missing_is_refused_at_start(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(REPOS / "ensembles" / "pipeline", repo / "pipeline")
    result = subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", "--model-repository", str(repo),
                             "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0"],
                            capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert result.returncode != 0
    assert (f"{repo / 'pipeline' / 'config.pbtxt'}: field 'ensemble_scheduling.step[0].model_name' of ensemble "
            "'pipeline': ensemble 'pipeline' depends on 'ens_plus_one' which has no loaded version") in result.stderr
