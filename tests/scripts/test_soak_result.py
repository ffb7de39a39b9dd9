"""The soak's verdict and summary (no server), its options and the split of the load over client processes."""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest
from soak_lib import soak
from soak_lib.clients import KindMix
from soak_lib.requests import (
    AIO_KINDS,
    ALL_KINDS,
    ORDINARY_KINDS,
    SYNC_CANCELLING_KINDS,
    WrongResult,
    check_double,
    http_request_bytes,
)
from soak_lib.result import SoakResult, SoakSettings, summary, to_json_dict, verdict
from soak_lib.server import RssReading, parse_pending, server_segments
from soak_lib.tally import Tally

MIB = 1024


def settings(**kw) -> SoakSettings:
    base = SoakSettings(minutes=10, concurrency=64, processes=4, aio_slots=2, cancel_share=0.25, request_timeout_s=20,
                        max_requests=1000, rss_growth_limit_mib=128, warmup_s=60, instances=2, stop_on_wedge_s=60,
                        kinds=ALL_KINDS, batching="dynamic")
    return dataclasses.replace(base, **kw)


def healthy(**kw) -> SoakResult:
    tally = Tally()
    for _ in range(10):
        tally.kind("grpc-small").record_ok(0.002)
        tally.kind("grpc-deadline").record_failure("grpc-deadline", "[StatusCode.DEADLINE_EXCEEDED] Deadline Exceeded")
    rss = [RssReading(t, 100 * MIB, 200 * MIB + int(t), 2) for t in range(0, 600, 5)]
    base = SoakResult(settings=settings(), started="2026-01-01 00:00:00 UTC", load_s=600.0, kinds=tally.to_dict(),
                      rss_ready=RssReading(0, 60 * MIB, 90 * MIB, 2), rss=rss,
                      rss_end=RssReading(600, 100 * MIB, 150 * MIB, 2), pending_max=12, pending_end=0, server_exit=0,
                      server_stop_s=0.5)
    return dataclasses.replace(base, **kw)


def test_a_healthy_soak_passes():
    result = healthy()
    assert verdict(result) == []
    text = summary(result)
    assert text.rstrip().endswith("PASS")
    assert "grpc-deadline" in text and "errors by kind" not in text
    assert "pending_request_count: max 12, at the end 0" in text


def test_every_failure_is_named():
    tally = Tally()
    tally.kind("grpc-small").record_failure("grpc-small", "[StatusCode.DEADLINE_EXCEEDED] Deadline Exceeded")
    result = healthy(kinds=tally.to_dict(), pending_end=56000, stopped_early="wedged: no request succeeded for 61 s",
                     client_problems=["client process 2 did not finish 50 s after the stop: killed"], server_exit=-9, server_leftovers=["/dev/shm/pytriton_ab_1_x"],
                     log_tracebacks=1)
    failures = verdict(result)
    assert failures == [
        "1 unexpected error(s) (not deliberate cancellations)",
        "no request succeeded",
        "load stopped early: wedged: no request succeeded for 61 s",
        "nv_inference_pending_request_count is 56000 after the load (must be 0)",
        "client process 2 did not finish 50 s after the stop: killed",
        "server exit status -9 (stop took 0.5 s)",
        "left behind by the server: /dev/shm/pytriton_ab_1_x",
        "1 traceback(s) in the server log",
    ]
    result.failures = failures
    text = summary(result)
    assert "grpc-small: [StatusCode.DEADLINE_EXCEEDED] Deadline Exceeded" in text
    assert "\nFAIL:\n  - 1 unexpected error(s)" in text


def test_unreadable_gauge_fails():
    assert verdict(healthy(pending_end=None)) == ["nv_inference_pending_request_count unreadable at the end"]


def test_request_bound_is_not_a_failure():
    assert verdict(healthy(stopped_early="request bound reached")) == []


def test_rss_growth_after_the_warm_up():
    # flat for the warm-up minute, then +1 MiB every 5 s: the last third vs the first third of the warm readings
    rss = [RssReading(t, 100 * MIB, 200 * MIB + max(0, t - 60) // 5 * MIB, 2) for t in range(0, 600, 5)]
    result = healthy(rss=rss)
    growth = result.rss_growth_kib()
    assert growth is not None and 70 * MIB < growth < 75 * MIB
    assert verdict(result) == []
    result = healthy(rss=rss, settings=settings(rss_growth_limit_mib=50))
    assert verdict(result) == [f"server + worker RSS grew {growth / 1024:.0f} MiB after the warm-up (limit 50 MiB)"]
    # one burst is not growth
    burst = [RssReading(t, 100 * MIB, (900 if t == 300 else 200) * MIB, 2) for t in range(60, 600, 5)]
    assert healthy(rss=burst).rss_growth_kib() == 0
    assert healthy(rss=burst).rss_max().t_s == 300
    assert healthy(rss=[]).rss_growth_kib() is None


def test_json_result_is_plain_data():
    data = json.loads(json.dumps(to_json_dict(healthy())))
    assert data["passed"] is True and data["pending_end"] == 0
    assert data["kinds"]["grpc-small"]["ok"] == 10 and data["rss"][0]["workers"] == 2


def test_parse_pending():
    text = ("# HELP nv_inference_pending_request_count Instantaneous number of pending requests\n"
            "# TYPE nv_inference_pending_request_count gauge\n"
            'nv_inference_pending_request_count{model="double",version="1"} 56\n'
            'nv_inference_pending_request_count{model="other",version="1"} 3.0\n'
            'nv_inference_request_success{model="double",version="1"} 1000\n')
    assert parse_pending(text) == 59
    assert parse_pending("nv_inference_pending_request_count 0\n") == 0
    assert parse_pending("nv_gpu_utilization 1\n") is None


def test_server_segments_by_owner_pid():
    entries = ["pytriton_3f2a_100_req_0", "pytriton_3f2a_101_resp_1", "pytriton_3f2a_999_req_0", "soak5_0_1_in",
               "other"]
    assert server_segments(entries, {100, 101}) == ["pytriton_3f2a_100_req_0", "pytriton_3f2a_101_resp_1"]


def test_kind_mix():
    rng = random.Random(0)
    mix = KindMix(ALL_KINDS, 0.25)
    picks = [mix.pick_sync(rng) for _ in range(4000)]
    share = sum(p in SYNC_CANCELLING_KINDS for p in picks) / len(picks)
    assert 0.22 < share < 0.28 and set(picks) == set(ORDINARY_KINDS + SYNC_CANCELLING_KINDS)
    aio = [mix.pick_aio(rng) for _ in range(2000)]
    assert 0.45 < aio.count("aio-cancel") / len(aio) < 0.55
    only = KindMix(["grpc-deadline"], 0.0)
    assert {only.pick_sync(rng) for _ in range(50)} == {"grpc-deadline"}
    assert only.has_sync and not only.has_aio
    assert not KindMix(AIO_KINDS, 0.25).has_sync
    assert {KindMix(ALL_KINDS, 0.0).pick_sync(rng) for _ in range(200)} <= set(ORDINARY_KINDS)


def test_plan_splits_concurrency_and_count():
    args = soak.parse_args(["--concurrency", "10", "--processes", "4", "--max-requests", "1001"])
    specs = soak.plan_clients(args, 1001, "g:1", "h:2", 123.0, "soak7_")
    assert [s.sync_slots + s.aio_slots for s in specs] == [3, 3, 2, 2]
    assert [s.aio_slots for s in specs] == [2, 2, 1, 1]  # at least one thread each
    assert sum(s.max_requests for s in specs) == 1001
    assert [s.region_prefix for s in specs] == ["soak7_0_", "soak7_1_", "soak7_2_", "soak7_3_"]
    args = soak.parse_args(["--concurrency", "8", "--kinds", "grpc-deadline"])
    assert all(s.aio_slots == 0 and s.sync_slots == 2 for s in soak.plan_clients(args, 10, "g", "h", 0.0, "p"))
    args = soak.parse_args(["--concurrency", "8", "--kinds", "aio-cancel"])
    assert all(s.aio_slots == 2 and s.sync_slots == 0 for s in soak.plan_clients(args, 10, "g", "h", 0.0, "p"))


def test_options():
    args = soak.parse_args([])
    assert (args.minutes, args.concurrency, args.processes, args.batching) == (10.0, 64, 4, ["dynamic", "off"])
    assert args.kinds == ALL_KINDS and args.out_dir.parent.name == "soak"
    assert soak.parse_args(["--batching", "off"]).batching == ["off"]


@pytest.mark.parametrize("argv", [["--concurrency", "2", "--processes", "4"], ["--cancel-share", "1.5"],
                                  ["--kinds", "grpc-small,grpc-huge"], ["--batching", "sometimes"],
                                  ["--minutes", "0"]])
def test_bad_options(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        soak.parse_args(argv)
    assert exc.value.code == 2 and "error:" in capsys.readouterr().err


def test_answers_are_checked():
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    check_double("grpc-small", x, x * 2)
    with pytest.raises(WrongResult, match=r"1 of 16 values differ"):
        y = x * 2
        y[0, 3] = 0
        check_double("grpc-small", x, y)
    with pytest.raises(WrongResult, match="shape"):
        check_double("grpc-small", x, (x * 2).reshape(16))
    with pytest.raises(WrongResult, match="no OUTPUT"):
        check_double("grpc-small", x, None)


def test_raw_http_request():
    x = np.ones((1, 4), dtype=np.float32)
    raw = http_request_bytes("127.0.0.1:8000", x)
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v2/models/double/infer HTTP/1.1"
    fields = dict(line.split(": ", 1) for line in lines[1:])
    assert int(fields["Content-Length"]) == len(body)
    n = int(fields["Inference-Header-Content-Length"])
    header = json.loads(body[:n])
    assert header["inputs"][0] == {"name": "INPUT", "shape": [1, 4], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 16}}
    assert body[n:] == x.tobytes()
