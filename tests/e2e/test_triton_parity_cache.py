"""The response cache (`--cache-config local,size=...`) as a client of tritonserver 2.51 sees it: which requests are
answered from the cache (the same inputs over HTTP and gRPC, another request id, priority and timeout parameters,
other BYTES elements, other parameters, another shape of the same bytes, other requested outputs), an error response,
the statistics and metrics that leaves, and a decoupled model with a cache (refused at load).

The model (tests/repositories/triton_parity `r_cache`, Triton's own Python API) answers RUNS, how many times it ran: an
answer whose RUNS is not new came from the cache. The answers pytriton gives are pinned; (slow, where it is installed)
the real tritonserver 2.51 gives the same except where TRITON_DIFFERS says why pytriton answers otherwise on purpose
(docs/guide/scheduling.md, Response cache)."""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests._support.paths import REPOSITORIES
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_SITE, REAL_TRITONSERVER, asked_of_real_tritonserver
from tests._support.serving import serve
from tests._support.waits import wait_until

REPOSITORY = REPOSITORIES / "triton_parity"
# (r_cache_dec is in a repository of its own: the models of triton_parity all load in mode none)
REFUSED = REPOSITORIES / "triton_parity_refused"
ARGS = ("--model-control-mode", "explicit", "--load-model", "r_cache", "--cache-config", "local,size=1048576",
        "--model-repository", str(REFUSED))
TRITON_ARGS = ("--cache-directory", str(REAL_SITE / "pytriton" / "tritonserver" / "caches"))
TIMEOUT_S = 30
COMPUTED, CACHED = "computed", "cached"
# (label, request): x the FP32 data of X, shape its shape ([1, len(x)]), s the elements of the optional BYTES input S,
# parameters, outputs the outputs asked for (all where None), request_id the request's id, over_grpc: sent over gRPC
REQUESTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("first", {}),
    ("the same again", {}),
    ("the same over grpc", {"over_grpc": True}),
    ("other data", {"x": [2.0]}),
    ("a request id", {"request_id": "abc"}),
    ("another request id", {"request_id": "xyz"}),
    ("a priority", {"parameters": {"priority": 1}}),
    ("a timeout", {"parameters": {"timeout": 5000}}),
    ("binary_data_output false", {"parameters": {"binary_data_output": False}}),
    ("bytes a", {"x": [6.0], "s": ["a"]}),
    ("bytes b", {"x": [6.0], "s": ["b"]}),
    ("bytes a again", {"x": [6.0], "s": ["a"]}),
    ("without the bytes", {"x": [6.0]}),
    ("bytes a, b", {"x": [6.0], "s": ["a", "b"]}),
    ("bytes ab", {"x": [6.0], "s": ["ab"]}),
    ("shape [1, 2]", {"x": [3.0, 4.0]}),
    ("the same bytes in shape [2, 1]", {"x": [3.0, 4.0], "shape": [2, 1]}),
    ("a parameter p=1", {"parameters": {"p": 1}}),
    ("p=1 again", {"parameters": {"p": 1}}),
    ("p=2", {"parameters": {"p": 2}}),
    ("grpc p='1'", {"x": [8.0], "over_grpc": True, "parameters": {"p": ("string_param", "1")}}),
    ("grpc p=1", {"x": [8.0], "over_grpc": True, "parameters": {"p": ("int64_param", 1)}}),
    ("Y asked for", {"x": [5.0], "outputs": ["Y"]}),
    ("then Y and Y2", {"x": [5.0], "outputs": ["Y", "Y2"]}),
    ("then Y2", {"x": [5.0], "outputs": ["Y2"]}),
    ("an error", {"x": [-1.0]}),
    ("the same error again", {"x": [-1.0]}),
)


def _send(http_url: str, grpc_url: str, x: tuple[float, ...] | list[float] = (1.0,), shape: list[int] | None = None,
          s: list[str] | None = None, parameters: dict[str, Any] | None = None, outputs: list[str] | None = None,
          request_id: str | None = None, over_grpc: bool = False) -> tuple[Any, dict[str, Any] | str]:
    """(status, {output: (shape, data)}) or (status, the error)."""
    shape = shape or [1, len(x)]
    if over_grpc:
        return _send_grpc(grpc_url, list(x), shape, s, parameters, outputs, request_id)
    body: dict[str, Any] = {"inputs": [{"name": "X", "datatype": "FP32", "shape": shape, "data": list(x)}]}
    if s is not None:
        body["inputs"].append({"name": "S", "datatype": "BYTES", "shape": [len(s)], "data": s})
    if parameters is not None:
        body["parameters"] = parameters
    if outputs is not None:
        body["outputs"] = [{"name": name} for name in outputs]
    if request_id is not None:
        body["id"] = request_id
    request = urllib.request.Request(f"http://{http_url}/v2/models/r_cache/infer", json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            reply = json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())["error"]
    return 200, {o["name"]: (o["shape"], o["data"]) for o in reply["outputs"]}


def _send_grpc(grpc_url: str, x: list[float], shape: list[int], s: list[str] | None,
               parameters: dict[str, tuple[str, Any]] | None, outputs: list[str] | None,
               request_id: str | None) -> tuple[Any, dict[str, Any] | str]:
    request = service_pb2.ModelInferRequest(model_name="r_cache", id=request_id or "")
    tensor = request.inputs.add(name="X", datatype="FP32")
    tensor.shape.extend(shape)
    tensor.contents.fp32_contents.extend(x)
    if s is not None:
        tensor = request.inputs.add(name="S", datatype="BYTES")
        tensor.shape.extend([len(s)])
        tensor.contents.bytes_contents.extend([v.encode() for v in s])
    for key, (kind, value) in (parameters or {}).items():
        setattr(request.parameters[key], kind, value)
    for name in outputs or ():
        request.outputs.add(name=name)
    with grpc.insecure_channel(grpc_url) as channel:
        try:
            reply = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=TIMEOUT_S)
        except grpc.RpcError as error:
            return error.code().name, error.details()
    kinds = {"FP32": np.float32, "INT64": np.int64}
    return "OK", {o.name: (list(o.shape), np.frombuffer(raw, kinds[o.datatype]).tolist())
                  for o, raw in zip(reply.outputs, reply.raw_output_contents)}


def _scenario(http_url: str, grpc_url: str, metrics_url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    runs = 0
    for label, request in REQUESTS:
        status, body = _send(http_url, grpc_url, **request)
        if isinstance(body, dict):  # RUNS new: computed; else answered from the cache
            run = body.pop("RUNS", (None, [None]))[1][0]
        else:
            found = re.search(r"\(run (\d+)\)", body)
            run = int(found.group(1)) if found else None
            body = re.sub(r"\(run \d+\)", "(run N)", body)
        how = "RUNS not asked for" if run is None else COMPUTED if run > runs else CACHED
        runs = max(runs, run or 0)
        out[label] = (status, how, body)
    def read() -> dict[str, Any]:
        with urllib.request.urlopen(f"http://{http_url}/v2/models/r_cache/stats", timeout=TIMEOUT_S) as answer:
            return json.loads(answer.read())["model_stats"][0]

    # (every request is a success here, a model's error response too; tritonserver 2.51 counts one after answering it)
    wait_until(lambda: read()["inference_stats"]["success"]["count"] >= len(REQUESTS), "the statistics")
    stats = read()
    out["statistics"] = {kind: stats["inference_stats"][kind]["count"] for kind in ("success", "fail", "cache_hit",
                                                                                    "cache_miss")}
    out["statistics"] |= {"execution_count": stats["execution_count"]}
    text = urllib.request.urlopen(f"http://{metrics_url}/metrics", timeout=TIMEOUT_S).read().decode()
    out["metrics"] = {name: value for name, value in re.findall(r"^(nv_cache_\w+(?:\{[^}]*\})?) (\S+)$", text, re.M)
                      if "duration" not in name and name != "nv_cache_util"}
    util = re.search(r"^nv_cache_util (\S+)$", text, re.M)
    out["nv_cache_util above 0"] = None if util is None else float(util.group(1)) > 0
    load = urllib.request.Request(f"http://{http_url}/v2/repository/models/r_cache_dec/load", b"", method="POST")
    try:
        with urllib.request.urlopen(load, timeout=TIMEOUT_S) as answer:
            out["a decoupled model with a cache"] = (answer.status, answer.read().decode())
    except urllib.error.HTTPError as error:
        out["a decoupled model with a cache"] = (error.code, json.loads(error.read())["error"].replace(
            str(REFUSED), "<repository>"))
    return json.loads(json.dumps(out))


Y1 = {"Y": ([1, 1], [1.0]), "Y2": ([1, 1], [2.0])}
Y6 = {"Y": ([1, 1], [6.0]), "Y2": ([1, 1], [12.0])}
Y8 = {"Y": ([1, 1], [8.0]), "Y2": ([1, 1], [16.0])}
OURS: dict[str, Any] = json.loads(json.dumps({
    "first": (200, COMPUTED, Y1),
    "the same again": (200, CACHED, Y1),
    "the same over grpc": ("OK", CACHED, Y1),
    "other data": (200, COMPUTED, {"Y": ([1, 1], [2.0]), "Y2": ([1, 1], [4.0])}),
    # what only steers scheduling or the wire is not part of the key
    "a request id": (200, CACHED, Y1),
    "another request id": (200, CACHED, Y1),
    "a priority": (200, CACHED, Y1),
    "a timeout": (200, CACHED, Y1),
    "binary_data_output false": (200, CACHED, Y1),
    "bytes a": (200, COMPUTED, Y6),
    "bytes b": (200, COMPUTED, Y6),
    "bytes a again": (200, CACHED, Y6),
    "without the bytes": (200, COMPUTED, Y6),
    "bytes a, b": (200, COMPUTED, Y6),
    "bytes ab": (200, COMPUTED, Y6),
    "shape [1, 2]": (200, COMPUTED, {"Y": ([1, 2], [3.0, 4.0]), "Y2": ([1, 2], [6.0, 8.0])}),
    # a shape, the request's parameters and the outputs asked for are part of the key
    "the same bytes in shape [2, 1]": (200, COMPUTED, {"Y": ([2, 1], [3.0, 4.0]), "Y2": ([2, 1], [6.0, 8.0])}),
    "a parameter p=1": (200, COMPUTED, Y1),
    "p=1 again": (200, CACHED, Y1),
    "p=2": (200, COMPUTED, Y1),
    "grpc p='1'": ("OK", COMPUTED, Y8),
    "grpc p=1": ("OK", COMPUTED, Y8),
    "Y asked for": (200, "RUNS not asked for", {"Y": ([1, 1], [5.0])}),
    "then Y and Y2": (200, "RUNS not asked for", {"Y": ([1, 1], [5.0]), "Y2": ([1, 1], [10.0])}),
    "then Y2": (200, "RUNS not asked for", {"Y2": ([1, 1], [10.0])}),
    # an error is never stored: the same request runs again
    "an error": (500, COMPUTED, "negative X (run N)"),
    "the same error again": (500, COMPUTED, "negative X (run N)"),
    # every lookup is a hit or a miss (the errors' too); the summary gauges say what the cache did
    "statistics": {"success": 27, "fail": 0, "cache_hit": 9, "cache_miss": 18, "execution_count": 18},
    "metrics": {'nv_cache_num_hits_per_model{model="r_cache",version="1"}': "9",
                'nv_cache_num_misses_per_model{model="r_cache",version="1"}': "18",
                "nv_cache_num_entries": "16", "nv_cache_num_hits": "9", "nv_cache_num_misses": "18",
                "nv_cache_num_lookups": "27", "nv_cache_num_evictions": "0"},
    "nv_cache_util above 0": True,
    "a decoupled model with a cache": (400, (
        "load failed for model 'r_cache_dec': version 1 is at UNAVAILABLE state: "
        "<repository>/r_cache_dec/config.pbtxt: Response Cache does not currently support model r_cache_dec with "
        "'decoupled' transaction policy. Please disable the response cache.;")),
}))

# Where tritonserver 2.51 answers otherwise, and pytriton keeps its answer on purpose (docs/guide/scheduling.md)
TRITON_DIFFERS: dict[str, Any] = json.loads(json.dumps({
    # Triton's key is the inputs' bytes only: the same bytes in another shape get the first answer's shape
    "the same bytes in shape [2, 1]": (200, CACHED, {"Y": ([1, 2], [3.0, 4.0]), "Y2": ([1, 2], [6.0, 8.0])}),
    # ... a request's parameters are not in it: a model that reads them answers with another request's answer
    "a parameter p=1": (200, CACHED, Y1),
    "p=2": (200, CACHED, Y1),
    "grpc p=1": ("OK", CACHED, Y8),
    # ... nor the outputs asked for: asking for more after asking for Y gets Y alone
    "then Y and Y2": (200, "RUNS not asked for", {"Y": ([1, 1], [5.0])}),
    "then Y2": (200, "RUNS not asked for", {"Y": ([1, 1], [5.0])}),
    # Triton stores an error response, and answers the same request again with a success without outputs
    "the same error again": (200, "RUNS not asked for", {}),
    "statistics": {"success": 27, "fail": 0, "cache_hit": 16, "cache_miss": 11, "execution_count": 11},
    # Triton 2.51's summary gauges stay 0 whatever its cache does
    "metrics": {'nv_cache_num_hits_per_model{model="r_cache",version="1"}': "16",
                'nv_cache_num_misses_per_model{model="r_cache",version="1"}': "11",
                "nv_cache_num_entries": "0", "nv_cache_num_hits": "0", "nv_cache_num_misses": "0",
                "nv_cache_num_lookups": "0", "nv_cache_num_evictions": "0"},
    # a configuration refused at load: precise words and a 400, as others (docs/guide/model-repositories.md)
    "a decoupled model with a cache": (500, "failed to load 'r_cache_dec', failed to poll from model repository"),
}))


@pytest.fixture(scope="module")
def answers():
    with serve("--model-repository", str(REPOSITORY), *ARGS) as server:
        return _scenario(server.http_url, server.grpc_url, server.metrics_url.split("/")[2])


@pytest.mark.parametrize("case", OURS)
def test_the_response_cache_as_a_client_sees_it(answers, case):
    assert answers[case] == OURS[case]


def test_every_case_is_pinned(answers):
    assert sorted(answers) == sorted(OURS)


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_answers_as_the_table_says():
    theirs = asked_of_real_tritonserver(REPOSITORY, _scenario, ARGS + TRITON_ARGS, metrics=True)
    assert theirs == OURS | TRITON_DIFFERS


def _without_a_server_cache(http_url: str, metrics_url: str) -> dict[str, Any]:
    """Two identical requests to r_cache on a server started without --cache-config."""
    out: dict[str, Any] = {}
    for label in ("first", "the same again"):
        status, body = _send(http_url, "")
        out[label] = (status, body.pop("RUNS")[1][0] if isinstance(body, dict) else body)
    text = urllib.request.urlopen(f"http://{metrics_url}/metrics", timeout=TIMEOUT_S).read().decode()
    out["metrics"] = dict(re.findall(r"^(nv_cache_\w+(?:\{[^}]*\})?) (\S+)$", text, re.M))
    return out


# As Triton: the model is served without a cache; its per-model cache counters are shown, at 0
WITHOUT_A_SERVER_CACHE: dict[str, Any] = json.loads(json.dumps({
    "first": (200, 1), "the same again": (200, 2),
    "metrics": {f'{name}{{model="r_cache",version="1"}}': "0" for name in (
        "nv_cache_num_hits_per_model", "nv_cache_hit_duration_per_model", "nv_cache_num_misses_per_model",
        "nv_cache_miss_duration_per_model")},
}))


def test_a_model_enabling_the_cache_on_a_server_without_one():
    with serve("--model-repository", str(REPOSITORY), *ARGS[:4]) as server:  # (no --cache-config)
        theirs = _without_a_server_cache(server.http_url, server.metrics_url.split("/")[2])
    assert json.loads(json.dumps(theirs)) == WITHOUT_A_SERVER_CACHE


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_without_a_cache_answers_the_same():
    theirs = asked_of_real_tritonserver(REPOSITORY, lambda http_url, _grpc, metrics_url: _without_a_server_cache(
        http_url, metrics_url), ARGS[:4], metrics=True)
    assert json.loads(json.dumps(theirs)) == WITHOUT_A_SERVER_CACHE
