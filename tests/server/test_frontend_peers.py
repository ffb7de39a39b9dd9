"""merge_metrics: the metrics port of several front-end processes as one Prometheus text; the shared-memory
orders: run by process 0, one at a time, a refused registration undone."""

from __future__ import annotations

import asyncio
import json

import pytest

from pytriton.exceptions import ServerError, Status
from pytriton.server.peers import FrontendPeers, merge_metrics

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


def test_a_stall_is_the_longest_of_the_processes_not_their_sum():
    stall = ("# TYPE pytriton_model_execution_stall_seconds gauge\n"
             'pytriton_model_execution_stall_seconds{{model="m",version="1"}} {}\n')
    lines = merge_metrics([(0, stall.format("0.5")), (1, stall.format("61.25")), (2, stall.format("0"))]).splitlines()
    assert 'pytriton_model_execution_stall_seconds{model="m",version="1"} 61.25' in lines


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
        asyncio.run(peers._broadcast("register", "system", "r", ["/key", 0, 64]))
    assert caught.value.status is Status.ALREADY_EXISTS
    registered = [(port, o["action"]) for port, o in peers.sent]
    assert registered[:2] == [(101, "register"), (102, "register")]
    assert registered[2:] == [(101, "unregister")]  # only where it was applied; never in the refusing one


def test_a_registration_all_apply_is_kept_and_unreachable_processes_are_skipped():
    peers = _FakePeers({101: (200, b""), 102: (0, b"")})  # 102: not listening (not started yet, or gone)
    asyncio.run(peers._broadcast("register", "cuda", "r", ["aGFuZGxl", 0, 64]))
    assert [(port, o["action"], o["kind"], o["args"]) for port, o in peers.sent] == [
        (101, "register", "cuda", ["aGFuZGxl", 0, 64]), (102, "register", "cuda", ["aGFuZGxl", 0, 64])]


def test_a_registration_a_silent_process_did_not_confirm_is_refused_and_undone_everywhere():
    peers = _FakePeers({101: (200, b""), 102: (-1, b"")})  # 102: connected, no answer in time (stopped)
    with pytest.raises(ServerError, match="process 2 did not answer within 5 s to the registration") as caught:
        asyncio.run(peers._broadcast("register", "system", "r", ["/key", 0, 64]))
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
        asyncio.run(peers._broadcast("register", "system", "r", ["/key", 0, 64]))
    assert caught.value.status is Status.UNAVAILABLE
    assert sorted((port, o["action"]) for port, o in peers.sent[2:]) == [(101, "unregister"), (102, "unregister")]


def test_a_refusal_that_is_not_a_registry_error_is_still_an_error():
    peers = _FakePeers({101: (400, b'{"error": "malformed shared-memory order"}'), 102: (200, b"")})
    with pytest.raises(ServerError, match="refused the registration") as caught:
        asyncio.run(peers._broadcast("register", "system", "r", ["/key", 0, 64]))
    assert caught.value.status is Status.INTERNAL


class _FakeProcess1(FrontendPeers):
    """Two processes, this one is 1: its orders go to process 0 (port 100), which answers `answer`."""

    def __init__(self, answer: tuple[int, bytes]):
        super().__init__(core=None, index=1, ports=[100, 101], token="t")  # type: ignore[arg-type]
        self.answer = answer
        self.sent: list[tuple[int, str, dict, float]] = []

    async def _request(self, port: int, path: str, body: bytes | None = None,
                       timeout_s: float = 5.0) -> tuple[int, bytes]:
        order = json.loads(body or b"{}")
        self.sent.append((port, path, order, timeout_s))
        return self.answer if order["action"] == "register" else (200, b"")


def test_a_process_other_than_0_asks_process_0_to_run_its_order_and_applies_nothing_itself():
    peers = _FakeProcess1((200, b""))
    asyncio.run(peers.shm("register", "system", "r", ["/key", 0, 64]))  # (core None: it is never touched)
    assert [(port, path, o["action"]) for port, path, o, _ in peers.sent] == [(100, "/local/order", "register")]
    assert peers.sent[0][3] > 5.0  # (process 0 may have orders to run before it, each sent to every process)
    refusal = json.dumps({"error": "shared memory region 'r' already in manager", "status": "ALREADY_EXISTS"})
    peers = _FakeProcess1((400, refusal.encode()))
    with pytest.raises(ServerError, match="already in manager") as caught:
        asyncio.run(peers.shm("register", "system", "r", ["/key", 0, 64]))
    assert caught.value.status is Status.ALREADY_EXISTS
    assert len(peers.sent) == 1  # refused by process 0: applied nowhere, nothing to undo


def test_a_registration_process_0_did_not_run_in_time_is_undone_after_it():
    peers = _FakeProcess1((-1, b""))  # process 0: connected, no answer in time (stopped)
    with pytest.raises(ServerError, match="process 0 did not answer within 30 s to the registration of shared memory "
                                          "region 'r'; the registration was undone") as caught:
        asyncio.run(peers.shm("register", "system", "r", ["/key", 0, 64]))
    assert caught.value.status is Status.UNAVAILABLE
    assert [(port, path, o["action"]) for port, path, o, _ in peers.sent] == [
        (100, "/local/order", "register"), (100, "/local/order", "unregister")]  # (ordered after it when it goes on)
    peers = _FakeProcess1((0, b""))  # process 0 gone (the group stops): nothing to undo
    with pytest.raises(ServerError, match="process 0 is not listening to the registration"):
        asyncio.run(peers.shm("register", "system", "r", ["/key", 0, 64]))
    assert len(peers.sent) == 1


def test_process_0_runs_orders_one_at_a_time_in_arrival_order(monkeypatch):
    """The second order is applied nowhere until the first has been applied everywhere."""
    events: list[str] = []
    monkeypatch.setattr("pytriton.server.peers.apply_shm",
                        lambda core, action, kind, name, args: events.append(f"apply {action} {name}"))

    class Process0(FrontendPeers):
        async def _broadcast(self, action, kind, name, args):
            events.append(f"send {action} {name}")
            await asyncio.sleep(0.01)
            events.append(f"sent {action} {name}")

    async def main() -> None:
        peers = Process0(core=None, index=0, ports=[100, 101], token="t")  # type: ignore[arg-type]
        await asyncio.gather(peers.shm("register", "system", "a", ["/a", 0, 8]),
                             peers.shm("unregister", "system", "", []))

    asyncio.run(main())
    assert events == ["apply register a", "send register a", "sent register a",
                      "apply unregister ", "send unregister ", "sent unregister "]


def test_process_0_undoes_a_registration_another_process_refused(monkeypatch):
    events: list[str] = []
    monkeypatch.setattr("pytriton.server.peers.apply_shm",
                        lambda core, action, kind, name, args: events.append(f"{action} {name}"))

    class Process0(FrontendPeers):
        async def _broadcast(self, action, kind, name, args):
            raise ServerError(Status.ALREADY_EXISTS, "shared memory region 'a' already in manager")

    peers = Process0(core=None, index=0, ports=[100, 101], token="t")  # type: ignore[arg-type]
    with pytest.raises(ServerError, match="already in manager"):
        asyncio.run(peers.shm("register", "system", "a", ["/a", 0, 8]))
    assert events == ["register a", "unregister a"]
