"""The trace machinery without a server: `--trace-config` parsing, sampling (level, rate, count, per model), the
trace file writer and the W3C traceparent parser."""

from __future__ import annotations

import json

import pytest

from pytriton.core.settings import TraceSettings
from pytriton.core.trace import Trace, Tracer, model_trace_settings, parse_trace_config
from pytriton.core.trace_file import TraceFileWriter
from pytriton.core.trace_otel import parse_traceparent
from pytriton.exceptions import ServerError


class ListSink:
    def __init__(self) -> None:
        self.traces: list[Trace] = []
        self.closed = False

    def submit(self, trace: Trace) -> None:
        self.traces.append(trace)

    def close(self) -> None:
        self.closed = True


def test_parse_triton_syntax():
    config = parse_trace_config(["triton,file=/tmp/t.json", "level=TIMESTAMPS", "rate=1", "count=100",
                                 "triton,log-frequency=50"])
    assert (config.file, config.level, config.rate, config.count, config.log_frequency, config.mode) == (
        "/tmp/t.json", ["TIMESTAMPS"], 1, 100, 50, "triton")
    settings = TraceSettings.from_config(config).get()
    assert settings == {"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "trace_count": "100", "log_frequency": "50",
                        "trace_file": "/tmp/t.json", "trace_mode": "triton"}


def test_parse_defaults_aliases_and_opentelemetry():
    assert TraceSettings.from_config(parse_trace_config([])).get()["trace_level"] == ["OFF"]
    assert parse_trace_config(["log_frequency=5", "file=/x"]).log_frequency == 5  # given without the mode prefix
    assert parse_trace_config(["level=TIMESTAMPS", "level=TENSORS"]).level == ["TIMESTAMPS", "TENSORS"]
    assert parse_trace_config(["level=OFF", "level=TIMESTAMPS"]).level == ["TIMESTAMPS"]
    config = parse_trace_config(["mode=opentelemetry", "opentelemetry,url=collector:4318/v1/traces",
                                 "opentelemetry,resource=service.name=mine", "opentelemetry,resource=team=ml",
                                 "opentelemetry,bsp_schedule_delay=200"])
    assert config.mode == "opentelemetry"
    assert config.otel_url == "http://collector:4318/v1/traces"
    assert config.otel_resource == {"service.name": "mine", "team": "ml"}
    assert config.otel_bsp["bsp_schedule_delay"] == 200
    assert parse_trace_config(["mode=opentelemetry"]).otel_url == "http://localhost:4318/v1/traces"


@pytest.mark.parametrize("entry, message", [
    ("rate=-1", "--trace-config rate: must be 0 or more, got -1"),
    ("count=-2", "--trace-config count: must be -1 or more, got -2"),
    ("count=many", "--trace-config count: expected an integer, got 'many'"),
    ("level=ALL", "--trace-config level: expected one of OFF, TIMESTAMPS, TENSORS, got 'ALL'"),
    ("mode=jaeger", "--trace-config mode: expected triton or opentelemetry, got 'jaeger'"),
    ("zipkin,url=x", "unknown trace mode 'zipkin'"),
    ("triton,rate=1", "--trace-config triton,rate: unknown Triton trace setting"),
    ("opentelemetry,file=x", "--trace-config opentelemetry,file: unknown OpenTelemetry trace setting"),
    ("opentelemetry,resource=novalue", "opentelemetry,resource: expected <key>=<value>"),
    ("verbose", "expected <setting>=<value>"),
    ("triton,log-frequency=x", "--trace-config log-frequency: expected an integer"),
])
def test_parse_errors_name_the_setting(entry, message):
    with pytest.raises(ValueError, match=None) as info:
        parse_trace_config([entry])
    assert message in str(info.value)


def test_entries_split_at_commas_keep_their_mode():
    """PYTRITON_TRITON_CONFIG_TRACE_CONFIG="triton,file=/t.json,level=TIMESTAMPS" arrives split at its commas."""
    config = parse_trace_config(["triton", "file=/t.json", "level=TIMESTAMPS", "opentelemetry", "url=h:1/v1/traces"])
    assert (config.file, config.level, config.otel_url) == ("/t.json", ["TIMESTAMPS"], "http://h:1/v1/traces")
    with pytest.raises(ValueError, match="--trace-config triton: expected <setting>=<value> after the mode"):
        parse_trace_config(["level=TIMESTAMPS", "triton"])


def test_export_batch_larger_than_queue_is_refused():
    with pytest.raises(ValueError, match="bsp_max_export_batch_size must not exceed bsp_max_queue_size"):
        parse_trace_config(["opentelemetry,bsp_max_queue_size=10", "opentelemetry,bsp_max_export_batch_size=20"])


def test_model_trace_settings():
    assert model_trace_settings(["level=TIMESTAMPS", "rate=1", "count=5", "log-frequency=2"]) == {
        "trace_level": ["TIMESTAMPS"], "trace_rate": "1", "trace_count": "5", "log_frequency": "2"}
    with pytest.raises(ValueError, match="'mode=opentelemetry' is not per model"):
        model_trace_settings(["mode=opentelemetry"])
    with pytest.raises(ValueError, match="rate: expected an integer"):
        model_trace_settings(["rate=x"])


def test_tracer_is_inactive_without_a_sink_or_with_level_off():
    settings = TraceSettings.from_config(parse_trace_config(["level=TIMESTAMPS"]))
    assert not Tracer(settings).active  # nowhere to write
    off = Tracer(TraceSettings("trace.json"), ListSink())  # (a file: a level may be set)
    assert not off.active
    off.settings.update({"trace_level": ["TIMESTAMPS"]}, "m")  # one model traced is enough
    assert off.active
    off.settings.update({"trace_level": None}, "m")
    assert not off.active


def test_rate_and_count_global_and_per_model():
    sink = ListSink()
    tracer = Tracer(TraceSettings.from_config(parse_trace_config(["level=TIMESTAMPS", "rate=3", "count=4"])), sink)
    picked = [tracer.start("a") is not None for _ in range(9)]
    assert picked == [False, False, True] * 3
    assert tracer.settings.get()["trace_count"] == "1"
    tracer.settings.update({"trace_rate": "1", "trace_count": "2"}, "b")  # b counts on its own
    assert [tracer.start("b") is not None for _ in range(3)] == [True, True, False]
    assert tracer.settings.get("b")["trace_count"] == "0"
    assert tracer.settings.get()["trace_count"] == "1"
    traces = [t for t in (tracer.start("a") for _ in range(6)) if t is not None]
    assert len(traces) == 1 and tracer.settings.get()["trace_count"] == "0"
    assert traces[0].id == 6  # ids count traces, from 1


def test_propagated_context_is_traced_whatever_the_rate_when_asked():
    tracer = Tracer(TraceSettings.from_config(parse_trace_config(["level=TIMESTAMPS", "rate=0"])), ListSink(),
                    always_trace_propagated=True)
    assert tracer.start("m") is None
    trace = tracer.start("m", traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    assert trace is not None and trace.traceparent.startswith("00-4bf9")


def test_compute_stamps_from_the_instance_report():
    trace = Trace(1, "m", "1")
    trace.stamp_compute(1000, 10, 20, 30)
    assert trace.timestamps == [("COMPUTE_START", 1000), ("COMPUTE_INPUT_END", 1010), ("COMPUTE_OUTPUT_START", 1030),
                                ("COMPUTE_END", 1060)]


def _trace(trace_id: int) -> Trace:
    trace = Trace(trace_id, "m", "2")
    trace.request_id = f"r{trace_id}"
    trace.stamp("REQUEST_START", 5)
    trace.stamp("REQUEST_END", 9)
    return trace


def test_file_writer_without_log_frequency_writes_one_file_at_close(tmp_path):
    path = tmp_path / "t.json"
    writer = TraceFileWriter(str(path), lambda: 0)
    for i in range(1, 4):
        writer.submit(_trace(i))
    assert not path.exists()
    writer.close()
    entries = json.loads(path.read_text())
    assert entries[:2] == [{"id": 1, "model_name": "m", "model_version": 2, "request_id": "r1", "parent_id": 0},
                           {"id": 1, "timestamps": [{"name": "REQUEST_START", "ns": 5},
                                                    {"name": "REQUEST_END", "ns": 9}]}]
    assert len(entries) == 6
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left


def test_file_writer_with_log_frequency_splits_files(tmp_path):
    frequency = [2]
    path = tmp_path / "t.json"
    writer = TraceFileWriter(str(path), lambda: frequency[0])
    for i in range(1, 6):
        writer.submit(_trace(i))
    frequency[0] = 3  # changed at run time: applies from the next trace on
    writer.submit(_trace(6))
    writer.close()  # the rest (traces 5 and 6) go to the next index
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["t.json.0", "t.json.1", "t.json.2"]
    ids = [[e["id"] for e in json.loads((tmp_path / n).read_text()) if "timestamps" in e] for n in names]
    assert ids == [[1, 2], [3, 4], [5, 6]]


def test_traces_held_for_the_stop_are_bounded(tmp_path, caplog):
    path = tmp_path / "t.json"
    writer = TraceFileWriter(str(path), lambda: 0, max_held=3)
    for i in range(1, 6):
        writer.submit(_trace(i))
    writer.close()
    assert [e["id"] for e in json.loads(path.read_text()) if "timestamps" in e] == [1, 2, 3]
    assert writer.dropped == 2
    assert "further traces are dropped: set a log frequency" in caplog.text


def test_a_trace_file_that_cannot_be_written_is_refused_at_start(tmp_path):
    with pytest.raises(RuntimeError, match=f"cannot write the trace file '{tmp_path}/no/t.json': '{tmp_path}/no' is "
                                           "not a writable directory"):
        TraceFileWriter(str(tmp_path / "no" / "t.json"), lambda: 0)


def test_an_empty_trace_file_is_still_valid_json(tmp_path):
    path = tmp_path / "t.json"
    TraceFileWriter(str(path), lambda: 0).close()
    assert json.loads(path.read_text()) == []


@pytest.mark.parametrize("header, expected", [
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
     (0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7, 1)),
    ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-00",
     (0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7, 0)),
    ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),  # an all-zero trace id is invalid
    ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),
    ("garbage", None),
])
def test_parse_traceparent(header, expected):
    assert parse_traceparent(header) == expected


def test_a_level_without_a_trace_file_is_refused_to_clients_only():
    """As tritonserver 2.51: a client may not set a level where its traces would go nowhere (mode triton, no file);
    a model bound with its own trace settings keeps them, as before (nothing is written)."""
    settings = TraceSettings()
    with pytest.raises(ServerError, match="trace file name is not given"):
        settings.update({"trace_level": ["TIMESTAMPS"]}, "m")
    assert settings.get("m")["trace_level"] == ["OFF"]
    assert settings.update({"trace_level": ["TIMESTAMPS"]}, "m", client=False)["trace_level"] == ["TIMESTAMPS"]
