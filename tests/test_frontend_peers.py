"""merge_metrics: the metrics port of several front-end processes as one Prometheus text."""

from __future__ import annotations

import asyncio
import json

import pytest

from pytriton._frontend_peers import FrontendPeers, merge_metrics
from pytriton.exceptions import ServerError, Status

ZERO = """# HELP nv_inference_count Number of inferences
# TYPE nv_inference_count counter
nv_inference_count{model="m",version="1"} 3
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="m",version="1"} 10.5
# TYPE pytriton_model_instance_up gauge
pytriton_model_instance_up{model="m",version="1",instance="m_0_0"} 1
# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]
# TYPE nv_cpu_utilization gauge
nv_cpu_utilization 0.25
"""
ONE = """# HELP nv_inference_count Number of inferences
# TYPE nv_inference_count counter
nv_inference_count{model="m",version="1"} 4
nv_inference_count{model="only_here",version="1"} 1
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="m",version="1"} 2
# TYPE pytriton_model_instance_up gauge
pytriton_model_instance_up{model="m",version="1",instance="m_0_0"} 0
# HELP pytriton_custom a family only one process has
# TYPE pytriton_custom gauge
pytriton_custom 5
"""


def test_counters_summed_machine_gauges_once_instances_apart():
    text = merge_metrics([(0, ZERO), (1, ONE)])
    lines = text.splitlines()
    assert 'nv_inference_count{model="m",version="1"} 7' in lines
    assert 'nv_inference_count{model="only_here",version="1"} 1' in lines
    assert 'nv_inference_request_duration_us{model="m",version="1"} 12.5' in lines
    assert 'pytriton_model_instance_up{model="m",version="1",instance="m_0_0",frontend="0"} 1' in lines
    assert 'pytriton_model_instance_up{model="m",version="1",instance="m_0_0",frontend="1"} 0' in lines
    assert [line for line in lines if line.startswith("nv_cpu_utilization ")] == ["nv_cpu_utilization 0.25"]
    assert "pytriton_custom 5" in lines
    assert lines.count("# TYPE nv_inference_count counter") == 1
    assert lines.index("# TYPE nv_inference_count counter") < lines.index('nv_inference_count{model="m",version="1"} 7')


def test_one_process_is_its_own_text():
    assert merge_metrics([(0, ZERO)]).splitlines() == [
        line.replace('instance="m_0_0"}', 'instance="m_0_0",frontend="0"}') for line in ZERO.splitlines()]


class _FakePeers(FrontendPeers):
    """Three processes (this one is 0); `answers` says how the others answer a registration, by port."""

    def __init__(self, answers: dict[int, tuple[int, bytes]]):
        super().__init__(core=None, index=0, ports=[100, 101, 102], token="t")  # type: ignore[arg-type]
        self.answers = answers
        self.sent: list[tuple[int, dict]] = []

    async def _request(self, port: int, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        order = json.loads(body or b"{}")
        self.sent.append((port, order))
        return self.answers[port] if order.get("action") == "register" else (200, b"")


def test_a_registration_one_process_refuses_is_undone_where_it_was_applied():
    refusal = json.dumps({"error": "shared memory region 'r' already in manager", "status": "ALREADY_EXISTS"})
    peers = _FakePeers({101: (200, b""), 102: (400, refusal.encode())})
    with pytest.raises(ServerError, match="already in manager") as caught:
        asyncio.run(peers.shm("register", "system", "r", ["/key", 0, 64]))
    assert caught.value.status is Status.ALREADY_EXISTS
    registered = [(port, o["action"]) for port, o in peers.sent]
    assert registered[:2] == [(101, "register"), (102, "register")]
    assert registered[2:] == [(101, "unregister")]  # only where it was applied; never in the refusing one


def test_a_registration_all_apply_is_kept_and_unreachable_processes_are_skipped():
    peers = _FakePeers({101: (200, b""), 102: (0, b"")})  # 102: not listening (not started yet, or gone)
    asyncio.run(peers.shm("register", "cuda", "r", ["aGFuZGxl", 0, 64]))
    assert [(port, o["action"], o["kind"], o["args"]) for port, o in peers.sent] == [
        (101, "register", "cuda", ["aGFuZGxl", 0, 64]), (102, "register", "cuda", ["aGFuZGxl", 0, 64])]


def test_a_registration_a_silent_process_did_not_confirm_is_refused_and_undone_everywhere():
    peers = _FakePeers({101: (200, b""), 102: (-1, b"")})  # 102: connected, no answer in time (stopped)
    with pytest.raises(ServerError, match="process 2 did not answer within 5 s to the registration") as caught:
        asyncio.run(peers.shm("register", "system", "r", ["/key", 0, 64]))
    assert caught.value.status is Status.UNAVAILABLE
    # undone where it was applied and where the order may still be read when the silent process goes on
    assert sorted((port, o["action"]) for port, o in peers.sent[2:]) == [(101, "unregister"), (102, "unregister")]


class _FakeGets(FrontendPeers):
    """Two processes (this one is 0); the other answers GETs from `answers` in turn."""

    def __init__(self, answers: list[tuple[int, bytes]]):
        super().__init__(core=None, index=0, ports=[100, 101], token="t")  # type: ignore[arg-type]
        self.answers = answers

    async def _request(self, port: int, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        return self.answers.pop(0)


def test_a_silent_peer_counts_with_its_last_answer_and_without_one_is_named():
    peers = _FakeGets([(-1, b""), (200, b"[1]"), (-1, b""), (0, b"")])
    with pytest.raises(ServerError, match="front-end process 1 did not answer") as caught:
        asyncio.run(peers._get_all("/local/stats"))
    assert caught.value.status is Status.UNAVAILABLE
    assert asyncio.run(peers._get_all("/local/stats")) == [(1, b"[1]")]
    assert asyncio.run(peers._get_all("/local/stats")) == [(1, b"[1]")]  # silent: its last answer
    assert asyncio.run(peers._get_all("/local/stats")) == []  # not listening (gone): left out


def test_a_peer_that_answers_an_error_counts_with_its_last_answer_too():
    peers = _FakeGets([(500, b"oops"), (200, b"[2]"), (400, b"no")])
    with pytest.raises(ServerError, match="front-end process 1 answered 500"):
        asyncio.run(peers._get_all("/local/metrics"))
    assert asyncio.run(peers._get_all("/local/metrics")) == [(1, b"[2]")]
    assert asyncio.run(peers._get_all("/local/metrics")) == [(1, b"[2]")]


def test_a_registration_a_process_answers_with_another_error_is_refused_and_undone():
    peers = _FakePeers({101: (200, b""), 102: (413, b"too large")})
    with pytest.raises(ServerError, match="front-end process 2 answered 413 to the registration") as caught:
        asyncio.run(peers.shm("register", "system", "r", ["/key", 0, 64]))
    assert caught.value.status is Status.UNAVAILABLE
    assert sorted((port, o["action"]) for port, o in peers.sent[2:]) == [(101, "unregister"), (102, "unregister")]


def test_a_refusal_that_is_not_a_registry_error_is_still_an_error():
    peers = _FakePeers({101: (400, b'{"error": "malformed shared-memory order"}'), 102: (200, b"")})
    with pytest.raises(ServerError, match="refused the registration") as caught:
        asyncio.run(peers.shm("register", "system", "r", ["/key", 0, 64]))
    assert caught.value.status is Status.INTERNAL
