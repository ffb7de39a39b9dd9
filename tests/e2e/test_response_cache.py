"""The response cache (`--cache-config local,size=BYTES`, a model's `response_cache`): a hit is answered without
reaching the model, equal to the response computed first; an LRU bounded in bytes; Triton's statistics and metrics.

The models count their executions (CALLS), so a response from the cache shows the count of the execution that
computed it, and the next miss shows that no execution happened in between."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
import uuid

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm

from tests._support.paths import REPO
from tests._support.serving import serve, tensor_args

REPOS = REPO / "tests" / "repositories"
CALLABLE_ARGS = tensor_args("input", [("IN", "fp32", "-1")]) + tensor_args("output", [("OUT", "fp32", "-1"),
                                                                                         ("CALLS", "int64", "1")])


def grpc_infer(client, x, model="counted", outputs=None, parameters=None, **kwargs):
    tensor = grpcclient.InferInput("X", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    wanted = [grpcclient.InferRequestedOutput(name) for name in outputs] if outputs else None
    return client.infer(model, [tensor], outputs=wanted, parameters=parameters, **kwargs)


def answer(result):
    """Outputs (datatype, shape, values) and parameters of a gRPC result."""
    response = result.get_response()
    outputs = {o.name: (o.datatype, list(o.shape), result.as_numpy(o.name).tolist()) for o in response.outputs}
    params = {k: getattr(v, v.WhichOneof("parameter_choice")) for k, v in response.parameters.items()}
    return outputs, params


def calls(result) -> int:
    return int(result.as_numpy("CALLS")[0])


def stats_of(client, model="counted"):
    return client.get_inference_statistics(model, as_json=True)["model_stats"][0]


def metric(server, name, model="counted") -> int:
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    match = re.search(rf'^{name}{{model="{model}",version="1"}} (\d+)$', text, re.M)
    assert match, f"{name} not in metrics:\n{text}"
    return int(match.group(1))


def test_a_hit_does_not_reach_the_model_and_equals_the_computed_response():
    with serve("--model-repository", str(REPOS / "cache"), "--cache-config", "local,size=1048576") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        x = np.array([1, 2, 3], dtype=np.float32)
        first = grpc_infer(client, x)
        assert calls(first) == 1
        again = grpc_infer(client, x)
        assert answer(again) == answer(first)  # outputs, datatypes, shapes and response parameters
        assert answer(first)[1] == {"calls": 1, "kind": "computed"}
        assert answer(first)[0]["TEXT"] == ("BYTES", [1], [b"seen"])

        http = httpclient.InferenceServerClient(server.http_url)  # the same request over HTTP: the same entry
        tensor = httpclient.InferInput("X", [3], "FP32")
        tensor.set_data_from_numpy(x, binary_data=False)
        result = http.infer("counted", [tensor])
        assert result.as_numpy("CALLS").tolist() == [1] and result.as_numpy("Y").tolist() == [2, 4, 6]
        assert result.get_response()["parameters"] == {"calls": 1, "kind": "computed"}

        assert calls(grpc_infer(client, np.array([1, 2, 4], dtype=np.float32))) == 2  # other bytes: computed
        assert calls(grpc_infer(client, x.reshape(1, 3).reshape(3))) == 1
        assert calls(grpc_infer(client, x, parameters={"note": "a"})) == 3  # a parameter the model may read
        assert calls(grpc_infer(client, x, parameters={"note": "a"}, priority=1)) == 3  # (scheduling only)
        only_y = grpc_infer(client, x, outputs=["Y", "CALLS"])  # other outputs asked for: computed, and cached
        assert calls(only_y) == 4 and only_y.as_numpy("TEXT") is None
        assert answer(grpc_infer(client, x, outputs=["Y", "CALLS"])) == answer(only_y)

        stats = stats_of(client)
        inference = stats["inference_stats"]
        hits, misses = 5, 4
        assert int(inference["cache_hit"]["count"]) == hits and int(inference["cache_miss"]["count"]) == misses
        assert int(inference["cache_hit"]["ns"]) > 0 and int(inference["cache_miss"]["ns"]) > 0
        assert int(inference["success"]["count"]) == hits + misses
        assert int(inference["queue"]["count"]) == hits + misses
        assert int(inference["compute_infer"]["count"]) == misses  # hits compute nothing
        assert int(stats["inference_count"]) == misses and int(stats["execution_count"]) == misses
        assert [int(b["compute_infer"]["count"]) for b in stats["batch_stats"]] == [misses]
        assert metric(server, "nv_cache_num_hits_per_model") == hits
        assert metric(server, "nv_cache_num_misses_per_model") == misses
        assert metric(server, "nv_inference_count") == misses
        assert metric(server, "nv_inference_request_success") == hits + misses
        assert metric(server, "nv_cache_hit_duration_per_model") >= 0


def test_summaries_of_cache_hits_and_misses_with_summary_latencies():
    # As Triton's (its qa/L0_metrics metrics_config_test test_cache_summaries_exist): with summary_latencies, a model
    # whose cache is on has nv_cache_hit_summary_us and nv_cache_miss_summary_us, and cached requests count in the
    # request summary (they were in the counters only).
    with serve("--model-repository", str(REPOS / "cache"), "--cache-config", "local,size=1048576",
               "--metrics-config", "summary_latencies=true") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        x = np.array([1, 2], dtype=np.float32)
        for _ in range(3):
            grpc_infer(client, x)  # one miss, then two hits
        assert metric(server, "nv_cache_miss_summary_us_count") == 1
        assert metric(server, "nv_cache_hit_summary_us_count") == 2
        assert metric(server, "nv_inference_request_summary_us_count") == 3
        text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
        hit = r'^nv_cache_hit_summary_us\{model="counted",version="1",quantile="0.5"\} \d+$'
        assert re.search(hit, text, re.M), text
        assert 'nv_cache_hit_summary_us_count{model="plain"' not in text  # (its cache is off)


def test_an_ensemble_caches_its_own_responses():
    with serve("--model-repository", str(REPOS / "cache"), "--cache-config", "local,size=1048576") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        x = np.array([1, 2], dtype=np.float32)
        assert [calls(grpc_infer(client, x, model="wrapped")) for _ in range(3)] == [1, 1, 1]
        assert calls(grpc_infer(client, x, model="plain")) == 2  # its step ran once
        inference = stats_of(client, "wrapped")["inference_stats"]
        assert (int(inference["cache_hit"]["count"]), int(inference["cache_miss"]["count"])) == (2, 1)


def test_least_recently_used_entries_are_evicted_within_the_size():
    # An entry counts its outputs' bytes: Y 400 + CALLS 8 + TEXT 8 (4-byte length + b"seen") = 416; two fit.
    with serve("--model-repository", str(REPOS / "cache"), "--cache-config", "local,size=1000") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        a, b, c = (np.full(100, v, dtype=np.float32) for v in (1, 2, 3))
        assert calls(grpc_infer(client, a)) == 1
        assert calls(grpc_infer(client, b)) == 2
        assert calls(grpc_infer(client, a)) == 1  # a hit: a is now the most recently used
        assert calls(grpc_infer(client, c)) == 3  # stored in place of b
        assert calls(grpc_infer(client, a)) == 1
        assert calls(grpc_infer(client, c)) == 3
        assert calls(grpc_infer(client, b)) == 4  # b was evicted; stored in place of a
        assert calls(grpc_infer(client, a)) == 5
        big = np.zeros(1000, dtype=np.float32)  # larger than the whole cache: computed each time, never stored
        assert calls(grpc_infer(client, big)) == 6
        assert calls(grpc_infer(client, big)) == 7
        assert calls(grpc_infer(client, b)) == 4  # (the entries stayed)
        inference = stats_of(client)["inference_stats"]
        assert int(inference["cache_hit"]["count"]) == 4
        assert int(inference["cache_miss"]["count"]) == 7  # as Triton: a response too large still counts a miss


def test_inputs_in_shared_memory_are_hashed_by_their_bytes():
    with serve("--model-repository", str(REPOS / "cache"), "--cache-config", "local,size=1048576") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        x = np.array([5, 6, 7, 8], dtype=np.float32)
        key = f"/rcache_{uuid.uuid4().hex}"
        handle = shm.create_shared_memory_region("in", key, x.nbytes)
        try:
            shm.set_shared_memory_region(handle, [x])
            client.register_system_shared_memory("in", key, x.nbytes)
            tensor = grpcclient.InferInput("X", [4], "FP32")
            tensor.set_shared_memory("in", x.nbytes)
            first = client.infer("counted", [tensor])
            assert calls(first) == 1
            assert calls(grpc_infer(client, x)) == 1  # the same bytes sent in the request: the same entry
            assert calls(client.infer("counted", [tensor])) == 1
            shm.set_shared_memory_region(handle, [x + 1])  # the region's bytes changed: another request
            changed = client.infer("counted", [tensor])
            assert calls(changed) == 2 and changed.as_numpy("Y").tolist() == [12, 14, 16, 18]
            client.unregister_system_shared_memory()
        finally:
            shm.destroy_shared_memory_region(handle)


def test_callable_with_the_cache_flag_and_without_a_server_cache():
    args = [*CALLABLE_ARGS, "--response-cache"]
    with serve("tests.models:counted_double", *args, "--cache-config", "local,size=4096") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        x = np.array([1.5], dtype=np.float32)
        tensor = grpcclient.InferInput("IN", [1], "FP32")
        tensor.set_data_from_numpy(x)
        assert [client.infer("counted_double", [tensor]).as_numpy("CALLS")[0] for _ in range(3)] == [1, 1, 1]
        assert client.get_model_config("counted_double", as_json=True)["config"]["response_cache"] == {"enable": True}
        assert metric(server, "nv_cache_num_hits_per_model", "counted_double") == 2
    with serve("tests.models:counted_double", *args) as server:  # as Triton: enabled only where the server has one
        client = grpcclient.InferenceServerClient(server.grpc_url)
        assert [client.infer("counted_double", [tensor]).as_numpy("CALLS")[0] for _ in range(3)] == [1, 2, 3]
        assert int(stats_of(client, "counted_double")["inference_stats"]["cache_hit"].get("count", 0)) == 0
        # (as tritonserver 2.51: its per-model counters are shown, at 0; test_triton_parity_cache.py)
        assert metric(server, "nv_cache_num_hits_per_model", "counted_double") == 0


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", *args, "--grpc-port", "0", "--http-port",
                           "0", "--metrics-port", "0", "--grpc-address", "127.0.0.1", "--http-address", "127.0.0.1",
                           "--metrics-address", "127.0.0.1"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


def test_decoupled_models_and_bad_cache_configs_are_refused():
    refusal = ("Response Cache does not currently support model streamed with 'decoupled' transaction policy. "
               "Please disable the response cache.")
    result = run_cli(["--model-repository", str(REPOS / "cache_decoupled"), "--cache-config", "local,size=1024"])
    assert result.returncode != 0 and refusal in result.stderr
    result = run_cli(["tests.models:counted_double", *CALLABLE_ARGS, "--decoupled", "--response-cache"])
    assert result.returncode != 0 and refusal.replace("streamed", "counted_double") in result.stderr
    result = run_cli(["tests.models:counted_double", *CALLABLE_ARGS, "--cache-config", "redis,host=x"])
    assert result.returncode != 0 and "unknown cache 'redis'" in result.stderr
