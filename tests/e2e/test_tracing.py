"""Tracing through real servers and the real clients: Triton's JSON trace file under load (gRPC and HTTP, batching
on), rate, count, log frequency and run-time changes; OpenTelemetry spans reaching an OTLP/HTTP receiver."""

from __future__ import annotations

import concurrent.futures
import http.server
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests._support.paths import REPO
from tests._support.serving import serve, tensor_args

MODEL = "batch_size_seen"
ARGS = [*tensor_args("input", [("INPUT", "fp32", "4")]), *tensor_args("output", [("SEEN", "int32", "2")]),
        "--max-batch-size", "8", "--dynamic-batching", "--max-queue-delay-us", "2000"]
# The order every traced request meets its timestamps in, per protocol.
ORDER = {
    "GRPC": ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START",
             "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "INFER_RESPONSE_COMPLETE", "REQUEST_END",
             "GRPC_SEND_START", "GRPC_SEND_END"],
    "HTTP": ["HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
             "COMPUTE_OUTPUT_START", "COMPUTE_END", "INFER_RESPONSE_COMPLETE", "REQUEST_END", "HTTP_SEND_START",
             "HTTP_SEND_END"],
}


def _input(module, batch: int = 1):
    tensor = module.InferInput("INPUT", [batch, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((batch, 4), dtype=np.float32))
    return tensor


def _load(server, requests_per_client: int, clients: int = 4, headers: dict | None = None) -> None:
    """`clients` gRPC and `clients` HTTP clients, each sending `requests_per_client` requests, all at once."""

    def grpc_client(index: int) -> None:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        for n in range(requests_per_client):
            result = client.infer(MODEL, [_input(grpcclient)], request_id=f"g{index}-{n}", headers=headers)
            assert result.as_numpy("SEEN").shape == (1, 2)
        client.close()

    def http_client(index: int) -> None:
        client = httpclient.InferenceServerClient(server.http_url)
        for n in range(requests_per_client):
            result = client.infer(MODEL, [_input(httpclient)], request_id=f"h{index}-{n}", headers=headers)
            assert result.as_numpy("SEEN").shape == (1, 2)
        client.close()

    with concurrent.futures.ThreadPoolExecutor(2 * clients) as pool:
        futures = [pool.submit(grpc_client, i) for i in range(clients)]
        futures += [pool.submit(http_client, i) for i in range(clients)]
        for future in futures:
            future.result(timeout=120)


def _traces(path: Path) -> dict[int, dict]:
    """The traces of one Triton trace file by id: the identity object merged with its timestamps."""
    entries = json.loads(path.read_text())
    assert isinstance(entries, list)
    traces: dict[int, dict] = {}
    for entry in entries:
        trace = traces.setdefault(entry["id"], {"timestamps": []})
        if "timestamps" in entry:
            trace["timestamps"] += entry["timestamps"]
        else:
            trace.update(entry)
    return traces


def _check_ordered(trace: dict) -> str:
    """Assert the trace has the full set of its protocol's timestamps, in order; return the protocol."""
    names = [ts["name"] for ts in trace["timestamps"]]
    protocol = "GRPC" if names[0].startswith("GRPC") else "HTTP"
    assert names == ORDER[protocol], trace
    ns = [ts["ns"] for ts in trace["timestamps"]]
    assert ns == sorted(ns), trace
    assert all(isinstance(n, int) and n > 0 for n in ns)
    return protocol


def test_trace_file_under_load_is_complete_and_ordered(tmp_path):
    path = tmp_path / "trace.json"
    args = [*ARGS, "--trace-config", f"triton,file={path}", "--trace-config", "level=TIMESTAMPS",
            "--trace-config", "rate=1"]
    with serve(f"tests.models:{MODEL}", *args) as server:
        _load(server, requests_per_client=40)
        batched = grpcclient.InferenceServerClient(server.grpc_url).get_inference_statistics(MODEL, as_json=True)
    traces = _traces(path)  # written at the graceful stop
    assert len(traces) == 8 * 40
    protocols = [_check_ordered(t) for t in traces.values()]
    assert protocols.count("GRPC") == protocols.count("HTTP") == 160
    assert all(t["model_name"] == MODEL and t["model_version"] == 1 for t in traces.values())
    assert {t["request_id"] for t in traces.values()} == {f"{p}{c}-{n}" for p in "gh" for c in range(4)
                                                         for n in range(40)}
    assert sorted(traces) == list(range(1, 321))
    # batching was on: some executions ran several requests (their compute timestamps are the execution's)
    stats = batched["model_stats"][0]
    assert int(stats["execution_count"]) < int(stats["inference_count"])


def test_rate_count_and_log_frequency(tmp_path):
    path = tmp_path / "trace.json"
    args = [*ARGS, "--trace-config", f"triton,file={path}", "--trace-config", "level=TIMESTAMPS",
            "--trace-config", "rate=4", "--trace-config", "count=30", "--trace-config", "triton,log-frequency=10"]
    with serve(f"tests.models:{MODEL}", *args) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for _ in range(40):  # every 4th is traced: 10 traces, one full file
            client.infer(MODEL, [_input(httpclient)])
        assert client.get_trace_settings()["trace_count"] == "20"  # as Triton: the count left
        _load(server, requests_per_client=20)  # 160 more: 40 sampled, but only 20 may still be traced
        assert client.get_trace_settings()["trace_count"] == "0"
        client.close()
    files = sorted(tmp_path.glob("trace.json.*"), key=lambda p: int(p.suffix[1:]))
    assert [p.name for p in files] == ["trace.json.0", "trace.json.1", "trace.json.2"]
    assert not path.exists()  # with a log frequency everything goes to the indexed files
    per_file = [_traces(p) for p in files]
    assert [len(t) for t in per_file] == [10, 10, 10]
    ids = [i for traces in per_file for i in traces]
    assert ids == list(range(1, 31))
    for traces in per_file:
        for trace in traces.values():
            _check_ordered(trace)


def test_settings_changed_at_run_time_apply(tmp_path):
    path = tmp_path / "trace.json"
    with serve(f"tests.models:{MODEL}", *ARGS, "--trace-config", f"triton,file={path}") as server:
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        http = httpclient.InferenceServerClient(server.http_url)
        for _ in range(5):  # level OFF: nothing traced
            grpc.infer(MODEL, [_input(grpcclient)])
        http.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "1"})
        for _ in range(3):
            grpc.infer(MODEL, [_input(grpcclient)], request_id="global")
        # the model's own settings: every 2nd request
        grpc.update_trace_settings(model_name=MODEL, settings={"trace_rate": "2"})
        for _ in range(4):
            http.infer(MODEL, [_input(httpclient)], request_id="model")
        http.update_trace_settings(model_name=MODEL, settings={"trace_level": ["OFF"]})
        for _ in range(3):
            http.infer(MODEL, [_input(httpclient)], request_id="off")
        grpc.close()
        http.close()
    traces = _traces(path)
    assert sorted(t["request_id"] for t in traces.values()) == ["global"] * 3 + ["model"] * 2
    for trace in traces.values():
        _check_ordered(trace)


def test_stream_requests_are_traced(tmp_path):
    """ModelStreamInfer: a non-decoupled model's request is traced as with ModelInfer; a decoupled model's trace has
    one INFER_RESPONSE_COMPLETE per response, between its COMPUTE_START and COMPUTE_END."""
    trace_args = ["--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1"]
    results: queue.Queue = queue.Queue()
    path = tmp_path / "plain.json"
    with serve(f"tests.models:{MODEL}", *ARGS, *trace_args, "--trace-config", f"triton,file={path}") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        for i in range(3):
            client.async_stream_infer(MODEL, [_input(grpcclient)], request_id=f"s{i}")
        for _ in range(3):
            assert results.get(timeout=30)[1] is None
        client.stop_stream()
    traces = _traces(path)
    assert sorted(t["request_id"] for t in traces.values()) == ["s0", "s1", "s2"]
    assert all(_check_ordered(t) == "GRPC" for t in traces.values())

    path = tmp_path / "decoupled.json"
    args = ["--decoupled", *tensor_args("input", [("COUNT", "int32", "1")]),
            *tensor_args("output", [("VALUE", "int32", "1")]), *trace_args, "--trace-config", f"triton,file={path}"]
    with serve("tests.models:countdown", *args) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        count = grpcclient.InferInput("COUNT", [1], "INT32")
        count.set_data_from_numpy(np.array([3], dtype=np.int32))
        client.async_stream_infer("countdown", [count], request_id="d", enable_empty_final_response=True)
        for _ in range(4):
            assert results.get(timeout=30)[1] is None
        client.stop_stream()
    (trace,) = _traces(path).values()
    names = [ts["name"] for ts in trace["timestamps"]]
    assert names == ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START",
                     *["INFER_RESPONSE_COMPLETE"] * 3, "COMPUTE_END", "REQUEST_END"]
    ns = [ts["ns"] for ts in trace["timestamps"]]
    assert ns == sorted(ns)


def _serve_to_the_end(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", f"tests.models:{MODEL}", *ARGS,
                           "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0", "--grpc-address",
                           "127.0.0.1", "--http-address", "127.0.0.1", "--metrics-address", "127.0.0.1", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=60, env=env)


def test_bad_trace_config_is_refused_naming_the_key():
    for value, expected in (("rate=often", "--trace-config rate: expected an integer, got 'often'"),
                            ("level=LOUD", "--trace-config level: expected one of OFF, TIMESTAMPS, TENSORS"),
                            ("triton,url=x", "--trace-config triton,url: unknown Triton trace setting"),
                            ("colour=blue", "--trace-config colour: unknown trace setting")):
        done = _serve_to_the_end("--trace-config", value)
        assert done.returncode == 2, done.stderr
        assert expected in done.stderr, done.stderr


def test_opentelemetry_mode_without_the_extra_says_what_to_install(tmp_path):
    hidden = tmp_path / "opentelemetry"
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ImportError('opentelemetry is hidden by this test')\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}")
    done = _serve_to_the_end("--trace-config", "mode=opentelemetry", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("Error: trace mode 'opentelemetry' needs the OpenTelemetry SDK and its OTLP/HTTP exporter: "
            "pip install 'pytriton[otel]'") in done.stderr


# ---- OpenTelemetry ---------------------------------------------------------------------------------------------
class _OtlpReceiver(http.server.ThreadingHTTPServer):
    """A minimal OTLP/HTTP collector: keeps the ExportTraceServiceRequests POSTed to /v1/traces."""

    def __init__(self) -> None:
        self.requests: list = []
        self.got = threading.Event()
        super().__init__(("127.0.0.1", 0), _OtlpHandler)


class _OtlpHandler(http.server.BaseHTTPRequestHandler):
    server: _OtlpReceiver

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces" and self.headers.get("Content-Type") == "application/x-protobuf":
            message = ExportTraceServiceRequest()
            message.ParseFromString(body)
            self.server.requests.append(message)
            self.server.got.set()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_opentelemetry_spans_join_the_clients_trace():
    pytest.importorskip("opentelemetry.sdk")
    receiver = _OtlpReceiver()
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    parent = "00f067aa0ba902b7"
    try:
        args = [*ARGS, "--trace-config", "mode=opentelemetry", "--trace-config", "level=TIMESTAMPS",
                "--trace-config", "rate=0",  # as Triton: only requests that carry a context are traced
                "--trace-config", f"opentelemetry,url=http://127.0.0.1:{receiver.server_address[1]}/v1/traces",
                "--trace-config", "opentelemetry,resource=service.name=traced-test",
                "--trace-config", "opentelemetry,bsp_schedule_delay=100"]
        with serve(f"tests.models:{MODEL}", *args) as server:
            traceparent = {"traceparent": f"00-{trace_id}-{parent}-01"}
            grpcclient.InferenceServerClient(server.grpc_url).infer(MODEL, [_input(grpcclient)], headers=traceparent)
            httpclient.InferenceServerClient(server.http_url).infer(MODEL, [_input(httpclient)], headers=traceparent)
            grpcclient.InferenceServerClient(server.grpc_url).infer(MODEL, [_input(grpcclient)])  # no context
            assert receiver.got.wait(30)
        spans = []
        for request in receiver.requests:
            for resource_spans in request.resource_spans:
                attrs = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                assert attrs["service.name"] == "traced-test"
                for scope in resource_spans.scope_spans:
                    spans += scope.spans
    finally:
        receiver.shutdown()
        receiver.server_close()
    assert sorted(s.name for s in spans) == sorted(["InferRequest", MODEL, "compute"] * 2)
    assert {s.trace_id.hex() for s in spans} == {trace_id}
    roots = [s for s in spans if s.name == "InferRequest"]
    assert {s.parent_span_id.hex() for s in roots} == {parent}
    by_id = {s.span_id: s for s in spans}
    for span in spans:
        if span.name == MODEL:
            assert by_id[span.parent_span_id].name == "InferRequest"
            attrs = {a.key: a.value for a in span.attributes}
            assert attrs["triton.model_name"].string_value == MODEL
            assert [e.name for e in span.events] == ["REQUEST_START", "QUEUE_START", "REQUEST_END"]
        if span.name == "compute":
            assert by_id[span.parent_span_id].name == MODEL
            assert [e.name for e in span.events] == ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START",
                                                     "COMPUTE_END"]
        assert span.start_time_unix_nano <= span.end_time_unix_nano
    root_events = sorted(e.name for s in roots for e in s.events)
    assert root_events == sorted(ORDER["GRPC"][:2] + ORDER["GRPC"][-2:] + ORDER["HTTP"][:2] + ORDER["HTTP"][-2:]
                                 + ["INFER_RESPONSE_COMPLETE"] * 2)
