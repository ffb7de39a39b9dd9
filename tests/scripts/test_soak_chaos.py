"""The chaos soak (scripts/soak --chaos): how it judges what its clients saw (no server); its client's checks and its
faults against a real server of the repository it writes; and a short bounded run of the whole (slow)."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.utils.shared_memory as shm
from soak_lib import soak
from soak_lib.chaos import wait_workers
from soak_lib.chaos_faults import FAULT_KINDS, FaultInjector, FaultPlan
from soak_lib.chaos_outcomes import HANG, UNEXPLAINED, WRONG, explain
from soak_lib.chaos_repo import EXPECTED, INSTANCES, write_repository
from soak_lib.chaos_requests import CHAOS_KINDS, LATE_WRITE, ChaosSlot, Hang, WrongResult, check
from soak_lib.chaos_result import AFTER_FRONTEND_KILL, ChaosResult, ChaosSettings, judge, summary, verdict
from soak_lib.server import RssReading, SoakServer
from soak_lib.tally import Tally

REPO = Path(__file__).resolve().parents[2]
MIB = 1024

# Messages the server answered in the faults the soak injects (read from runs of it).
KILLED = ("InferenceServerException: [StatusCode.UNAVAILABLE] Failed to process the request(s) for model "
          "'double_0_0', message: worker process of model instance 'double_0_0' (pid 15889) was killed by SIGKILL; "
          "it is being restarted")
STEP_KILLED = ("InferenceServerException: [StatusCode.UNAVAILABLE] in ensemble 'pipeline', Failed to process the "
               "request(s) for model instance 'times_two_0_0', message: worker process of model instance "
               "'times_two_0_0' (pid 15802) was killed by SIGKILL; it is being restarted")
CALLEE_KILLED = ("InferenceServerException: [StatusCode.INTERNAL] bls: double failed: Failed to process the request(s) "
                 "for model instance 'double_0_1', message: worker process of model instance 'double_0_1' (pid 15890) "
                 "was killed by SIGKILL; it is being restarted")
EXEC_TIMEOUT = ("InferenceServerException: [StatusCode.UNAVAILABLE] model 'double' instance 'double_0_0' did not finish "
                "an execution within the execution timeout of 5 s")
NO_REGION = "InferenceServerException: [StatusCode.NOT_FOUND] Unable to find shared memory region: 'chaos1e_0_3_out'"
REFUSED = ("InferenceServerException: [StatusCode.UNAVAILABLE] failed to connect to all addresses; last error: UNKNOWN: "
           "ipv4:127.0.0.1:36487: Failed to connect to remote host: Connection refused")


def test_an_error_is_explained_by_the_fault_the_server_names_in_it():
    assert explain(KILLED) == ("explained", "worker killed")
    assert explain(STEP_KILLED) == ("explained", "ensemble step: worker killed")
    assert explain(CALLEE_KILLED) == ("explained", "BLS callee: worker killed")
    assert explain(EXEC_TIMEOUT) == ("explained", "execution timeout")
    assert explain(NO_REGION) == ("explained", "region re-registered")
    assert explain("WrongResult: wrong result (grpc-double): 1 of 16 values differ")[0] == WRONG
    assert explain("Hang: no answer within 15 s (15.0 s): InferenceServerException: Deadline Exceeded")[0] == HANG
    assert explain("InferenceServerException: [StatusCode.INTERNAL] unexpected error")[0] == UNEXPLAINED
    # a refused connection is explained only once a front-end process was killed
    assert explain(REFUSED)[0] == UNEXPLAINED
    assert explain(REFUSED, frontend_killed=True) == ("explained", "front-end process killed")
    assert explain("WrongResult: wrong", frontend_killed=True)[0] == WRONG


def settings(**kw) -> ChaosSettings:
    base = ChaosSettings(phase="explicit", minutes=30, concurrency=16, processes=2, frontend_processes=1,
                         execution_timeout_s=5, client_timeout_s=15, fault_interval_s=2, fault_kinds=FAULT_KINDS,
                         rss_growth_limit_mib=128, fd_growth_limit=32, warmup_s=60, max_requests=1000)
    return dataclasses.replace(base, **kw)


def healthy(**kw) -> ChaosResult:
    tally = Tally()
    for _ in range(10):
        tally.kind("grpc-double-shm").record_ok(0.002)
        tally.kind("deadline-bls").cancelled += 1
        tally.kind("after-deadline-bls").record_ok(0.004)
    tally.kind("stream-pipeline").record_failure("stream-pipeline", STEP_KILLED)
    tally.kind("http-bls").record_failure("http-bls", CALLEE_KILLED)
    tally.kind("probe-grpc-double").record_ok(0.001)
    faults = {"counts": {"kill-worker": {"killed a worker of double": 3}, "reload": {"reloaded bls": 2}},
              "problems": []}
    base = ChaosResult(
        settings=settings(), started="2026-12-07 01:00:00 UTC", commit="abc1234", load_s=1800.0, kinds=tally.to_dict(),
        faults=faults, rss_ready=RssReading(0, 70 * MIB, 220 * MIB, 5),
        rss=[RssReading(t, 80 * MIB, 230 * MIB, 5) for t in range(0, 1800, 5)],
        rss_end=RssReading(1800, 82 * MIB, 229 * MIB, 5), fds_ready=29, fds_end=36, pending_max=17, pending_end=0,
        workers_end=dict(INSTANCES), workers_expected=dict(INSTANCES), server_exit=0, server_stop_s=0.1)
    return dataclasses.replace(base, **kw)


def test_a_run_whose_errors_faults_explain_passes():
    result = healthy()
    assert verdict(result) == []
    out = judge(result.tally)
    assert out.by_label == {"ensemble step: worker killed": 1, "BLS callee: worker killed": 1}
    assert out.per_kind["deadline-bls"]["cancelled"] == 10 and out.total("explained") == 2
    text = summary(result)
    assert text.rstrip().endswith("PASS")
    for line in ("errors explained by a fault:", "reload: reloaded bls 2", "server fds: 29 at ready, 36 at the end",
                 "RSS MiB, server + workers: ready 70 + 220", "exit status 0, 0.1 s after SIGINT", "commit abc1234"):
        assert line in text


@pytest.mark.parametrize(("kind", "message", "named"), [
    ("after-deadline-double", "WrongResult: wrong result (after-deadline-double): 16 of 16 values differ", "1 wrong"),
    ("grpc-pipeline", "Hang: no answer within 15 s (15.0 s): InferenceServerException: Deadline Exceeded", "1 hang"),
    ("http-double", "InferenceServerException: [500] something nobody explains", "1 error(s) that no fault explains"),
    ("probe-grpc-double", KILLED, "1 error(s) that no fault explains"),  # after the faults, nothing explains one
    ("grpc-double", AFTER_FRONTEND_KILL + "WrongResult: wrong result", "1 wrong"),
])
def test_one_wrong_answer_hang_or_unexplained_error_fails_the_run(kind, message, named):
    result = healthy()
    tally = result.tally
    tally.kind(kind).record_failure(kind, message)
    failures = verdict(dataclasses.replace(result, kinds=tally.to_dict()))
    assert len(failures) == 1 and failures[0].startswith(named), failures
    assert message.removeprefix(AFTER_FRONTEND_KILL)[:40] in summary(dataclasses.replace(result, kinds=tally.to_dict(),
                                                                                          failures=failures))


@pytest.mark.parametrize(("change", "named"), [
    ({"faults": {"counts": {"kill-worker": {"skipped: no worker running": 4}}, "problems": []}}, "no fault was injected"),
    ({"faults": {"counts": {"reload": {"PROBLEM": 1}}, "problems": ["reload: loading 'bls' again failed"]}},
     "fault reload: loading 'bls' again failed"),
    ({"pending_end": 2}, "nv_inference_pending_request_count is 2"),
    ({"workers_end": {**INSTANCES, "double": 3}}, "worker processes at the end"),
    ({"fds_end": 29 + 33}, "the server's open fds grew from 29 to 62"),
    ({"rss_end": RssReading(1800, 300 * MIB, 229 * MIB, 5)}, "server + worker RSS grew"),
    ({"registrations_left": ["chaos1e_0_1_in"]}, "registrations left after the clients unregistered: chaos1e_0_1_in"),
    ({"mapped_regions_left": ["/dev/shm/chaos1e_0_1_out"]}, "client regions still mapped by the server"),
    ({"dead_owner_segments": ["pytriton_ab_123_resp_0"]}, "segments of dead processes left while serving"),
    ({"server_leftovers": ["process 123 still running 10 s after the stop; killed"]}, "left behind by the server"),
    ({"hold_leftovers": ["hold-1-1"]}, "hold files left"),
    ({"server_exit": -9}, "server exit status -9"),
    ({"log_tracebacks": 1}, "1 traceback(s) in the server log"),
    ({"client_problems": ["client process 1 did not finish 45 s after the stop: killed"]}, "client process 1"),
    ({"client_threads_max": 30349}, "a client process of the soak had 30349 threads"),
])
def test_every_leak_and_fault_problem_fails_the_run(change, named):
    failures = verdict(healthy(**change))
    assert len(failures) == 1 and failures[0].startswith(named), failures


def test_the_group_phase_must_end_with_the_group_stopping_and_naming_the_killed_process():
    group = settings(phase="group", frontend_processes=2)
    killed = {"pid": 4242, "index": 1, "t_s": 12.0, "exit_after_s": 0.7, "logged": True}
    passed = healthy(settings=group, frontend_kill=killed, server_exit=1, pending_end=None, workers_end={})
    assert verdict(passed) == []
    assert "front-end process 1 (pid 4242) killed at 12 s" in summary(passed)
    assert verdict(dataclasses.replace(passed, frontend_kill={}))[0] == "no front-end process was killed"
    for wrong in ({"server_exit": 0}, {"frontend_kill": {**killed, "logged": False}}, {"server_exit": None}):
        assert verdict(dataclasses.replace(passed, **wrong))[0].startswith("after front-end process pid 4242")


def test_chaos_options():
    args = soak.parse_args(["--chaos", "--execution-timeout", "3", "--hang-margin", "7"])
    assert (args.chaos, args.concurrency, args.processes, args.client_timeout) == (True, 16, 2, 10.0)
    assert args.faults == FAULT_KINDS and args.out_dir.name.endswith("-chaos")
    assert soak.parse_args([]).concurrency == 64  # the soak's own defaults stay
    assert soak.parse_args(["--chaos", "--faults", "reload,kill-worker"]).faults == ["reload", "kill-worker"]
    for argv in (["--chaos", "--faults", "unplug"], ["--chaos", "--execution-timeout", "0"],
                 ["--chaos", "--frontend-processes", "0"]):
        with pytest.raises(SystemExit):
            soak.parse_args(argv)


def test_a_wrong_value_names_the_withdrawn_call_whose_answer_it_is():
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    check("grpc-bls", "bls", x, x * 2 + 1)
    earlier = x - 1
    with pytest.raises(WrongResult, match="16 of 16 values differ, first at 0: -2.0 instead of 0.0; they are the answer"):
        check("after-deadline-double", "double", x, EXPECTED["double"](earlier), withdrawn=("double", earlier))
    big = np.arange(64, dtype=np.float32).reshape(1, 64)
    late = EXPECTED["double"](big).copy()
    late[0, :16] = EXPECTED["double"](earlier)[0]  # a shorter withdrawn answer written over the start
    with pytest.raises(WrongResult, match="16 of 64 values differ.*answer \\(16 values\\) of the call on this region"):
        check("after-deadline-double", "double", big, late, withdrawn=("double", earlier))
    with pytest.raises(WrongResult, match="shape"):
        check("grpc-double", "double", x, x.reshape(16))


# ------------------------------------------------------------------------------------ against a real server ---
@pytest.fixture(scope="module")
def chaos_server(tmp_path_factory):
    """The soak's repository served with model control explicit and an execution timeout of 2 s."""
    work = tmp_path_factory.mktemp("chaos")
    (work / "holds").mkdir()
    repo = write_repository(work / "repo", work / "holds")
    server = SoakServer(Path(sys.executable), work / "server.log", 0, False, exit_timeout_s=5.0, model_args=[
        "--model-repository", str(repo), "--model-control-mode", "explicit", "--load-model", "*",
        "--execution-timeout", "2"])
    server.start(timeout_s=120)
    try:
        yield server, work / "holds"
    finally:
        code, _ = server.stop()
        left = server.leftovers()
        assert code == 0 and not left, (code, left, (work / "server.log").read_text()[-3000:])


@pytest.fixture
def slot(chaos_server):
    server, _ = chaos_server
    slot = ChaosSlot(server.grpc_url, server.http_url, f"chaostest{id(server) % 10000}_", 1, 15.0, random.Random(1))
    try:
        yield slot
    finally:
        assert slot.close() == []


def test_every_kind_of_call_answers_right_through_the_real_clients(slot):
    seen = {}
    for kind in CHAOS_KINDS:
        for outcome in slot.send_checked(kind):
            seen[outcome.kind] = outcome.result
    assert set(seen) == set(CHAOS_KINDS) | {f"after-{k}" for k in CHAOS_KINDS if k.startswith("deadline-")}
    assert all(r in ("ok", "cancelled") for r in seen.values()), seen
    assert all(seen[k] == "ok" for k in seen if not k.startswith("deadline-"))


def test_a_write_into_the_output_region_after_its_answer_was_read_is_a_wrong_answer(slot):
    assert [o.result for o in slot.send_checked("grpc-double-shm")] == ["ok"]
    answer = slot.out_holds
    assert answer is not None
    x = answer / 2
    slot.withdrawn = ("pipeline", x - 3)  # as if a call with that input had been cut by its deadline
    shm.set_shared_memory_region(slot.handles["out"], [EXPECTED["pipeline"](x - 3)])  # ... and written late
    late, then = slot.send_checked("http-bls-shm")
    assert late.kind == LATE_WRITE and isinstance(late.result, WrongResult)
    assert "changed after its answer was read" in str(late.result) and "cut by its deadline" in str(late.result)
    assert then.result == "ok"
    assert [o.kind for o in slot.send_checked("http-bls-shm")] == ["http-bls-shm"]  # the region holds its answer


def test_streams_leave_no_thread_behind(slot):
    """A stream is ended at once (pending requests cancelled), and gRPC's thread that reads its requests ends too
    (tritonclient alone leaves one behind per cancelled stream)."""
    before = threading.active_count()
    for _ in range(30):
        assert [o.result for o in slot.send_checked("stream-double")] == ["ok"]
    deadline = time.monotonic() + 10
    while threading.active_count() > before + 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # (the threads end as their streams close: waited for, bounded)
    assert threading.active_count() <= before + 2, threading.enumerate()


def test_an_error_after_the_client_timeout_is_a_hang(slot):
    slot.timeout_s = 0.05

    def no_answer() -> str:
        time.sleep(0.06)
        raise TimeoutError("timed out")

    def quick_error() -> str:
        raise ConnectionResetError("reset")

    assert isinstance(slot._timed("grpc-double", no_answer).result, Hang)
    assert isinstance(slot._timed("grpc-double", quick_error).result, ConnectionResetError)
    assert slot._timed("deadline-double", no_answer, ordinary=False).result.__class__ is TimeoutError


def test_held_requests_fail_with_the_error_of_the_fault_that_hit_them(chaos_server, slot):
    server, holds = chaos_server
    plan = FaultPlan(kinds=FAULT_KINDS, interval_s=1, timeout_s=15, exec_timeout_s=2, hold_dir=holds,
                     regions=list(slot.names.values()))
    injector = FaultInjector(server, plan, seed=3)
    try:
        for kind in FAULT_KINDS:
            # (each fault on a server whose killed workers are back: a request could otherwise reach a worker that
            # was killed an instant before, and fail before its hold began)
            assert wait_workers(server, INSTANCES, wait_s=30) == INSTANCES
            injector.inject(kind)
    finally:
        injector.close()
    log = injector.log.to_dict()
    assert log["problems"] == []
    counts = log["counts"]
    assert counts["kill-bls-callee"] == {"request failed: BLS callee: worker killed": 1}
    assert counts["kill-ensemble-step"] == {"request failed: ensemble step: worker killed": 1}
    assert counts["exec-timeout"] == {"request failed: execution timeout": 1}
    assert list(counts["reload"])[0].startswith("reloaded ")
    assert list(counts["reregister"])[0].startswith("re-registered a client's region")
    assert list(counts["kill-worker"])[0].startswith("killed a worker of ")
    assert list(holds.iterdir()) == []
    # the server serves on: the killed workers come back, every model answers right
    for kind in ("grpc-double-shm", "http-pipeline-shm", "grpc-bls", "stream-pipeline"):
        deadline = time.monotonic() + 30
        while (outcomes := slot.send_checked(kind))[-1].result != "ok" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert outcomes[-1].result == "ok", outcomes


def test_a_held_request_that_outlives_the_client_timeout_is_a_hang_problem(chaos_server):
    server, holds = chaos_server
    plan = FaultPlan(kinds=["exec-timeout"], interval_s=1, timeout_s=0.5, exec_timeout_s=2, hold_dir=holds,
                     regions=[], hold_s=1.0)
    injector = FaultInjector(server, plan, seed=4)
    try:
        injector.inject("exec-timeout")
    finally:
        injector.close()
    problems = injector.log.to_dict()["problems"]
    assert len(problems) == 1 and problems[0].startswith("exec-timeout: the held double request ended hang")


# ------------------------------------------------------------------------------------------- the whole run ---
@pytest.mark.slow
def test_a_short_chaos_run_passes_and_reports_every_fault(tmp_path):
    """scripts/soak --chaos for 0.5 min: 0.375 with model control explicit (every fault kind), 0.125 with two front-end
    processes, one of them killed. Bounded: the script ends within its minutes + about 2 minutes."""
    out = tmp_path / "out"
    run = subprocess.run([str(REPO / "scripts" / "soak"), "--chaos", "--minutes", "0.5", "--frontend-processes", "2",
                          "--fault-interval", "1", "--out-dir", str(out)], cwd=REPO, capture_output=True, text=True,
                         timeout=420, check=False)
    result = json.loads((out / "result.json").read_text())
    explicit, group = result["phases"]
    assert explicit["passed"], run.stdout[-6000:] + run.stderr[-3000:]
    # Known, reported in docs/soak.md: now and then a worker of the killed front-end process prints a traceback as it
    # exits (its SIGTERM handler runs inside pyzmq's atexit). The soak fails on it; this test checks the rest.
    assert [f for f in group["failures"] if "traceback(s) in the server log" not in f] == [], run.stdout[-6000:]
    assert run.returncode == (0 if group["passed"] else 1)
    assert set(explicit["faults"]["counts"]) == set(FAULT_KINDS)
    assert explicit["judged"]["per_kind"]["after-deadline-double"]["ok"] > 0
    assert all(n == 0 for row in explicit["judged"]["per_kind"].values() for c, n in row.items()
               if c in (WRONG, HANG, UNEXPLAINED))
    assert explicit["workers_end"] == INSTANCES and explicit["pending_end"] == 0
    assert group["frontend_kill"]["logged"] and group["server_exit"] == 1
    assert group["server_leftovers"] == [] and explicit["server_leftovers"] == []
    summary_text = (out / "summary.txt").read_text()
    assert "faults by kind and outcome:" in summary_text and "PASS" in summary_text
    assert (out / "server-chaos-explicit.log").exists() and (out / "server-chaos-group.log").exists()
