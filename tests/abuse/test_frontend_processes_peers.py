"""Attacks on `pytriton serve --frontend-processes 2` (docs/multi-frontend.md): the private peer ports (loopback,
token-checked) against local clients without the token, and a peer that stops answering (SIGSTOP) while clients
read statistics and metrics or register shared memory."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tests._support.serving import ServerProcess, serve, tensor_args
from tests.abuse._frontend_group import FRONTEND_RE, OWN_CONNECTION, PEER_RE, listed_regions

MODEL = "server_pid"
ARGS = ["tests.frontend_models:server_pid", *tensor_args("input", [("IN", "fp32", "-1")]),
        *tensor_args("output", [("OUT", "fp32", "-1"), ("SERVER", "int64", "1")]),
        "--frontend-processes", "2"]
TOKEN_ENV = b"PYTRITON_FRONTEND_PEER_TOKEN="


def frontends(server: ServerProcess) -> dict[int, int]:
    return {int(index): int(pid) for index, pid in FRONTEND_RE.findall(server.log)}


def peer_ports(server: ServerProcess) -> dict[int, int]:
    return {int(index): int(port) for index, port in PEER_RE.findall(server.log)}


def token_of(pid: int) -> bytes:
    """The group's token, as a local process of the same user can read it (the process's environment)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        entries = f.read().split(b"\0")
    return next(e[len(TOKEN_ENV):] for e in entries if e.startswith(TOKEN_ENV))


def raw(port: int, data: bytes, timeout_s: float = 10.0) -> bytes:
    """Send `data` on a new connection; the head and first bytes of the answer (b"" if it closed unanswered)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as conn:
        conn.sendall(data)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def infer_over_new_connections(server: ServerProcess, count: int) -> list[int]:
    pids = []
    for i in range(count):
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            tensor = httpclient.InferInput("IN", [4], "FP32")
            tensor.set_data_from_numpy(np.full(4, i, dtype=np.float32))
            pids.append(int(client.infer(MODEL, [tensor]).as_numpy("SERVER")[0]))
        finally:
            client.close()
    return pids


def test_the_token_is_on_no_command_line_and_in_no_log():
    with serve(*ARGS) as server:
        pids = [*frontends(server).values(), *server.worker_pids(), server.process.pid]
        token = token_of(frontends(server)[0])
        assert len(token) == 32
        for pid in pids:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                assert token not in f.read()
            assert os.stat(f"/proc/{pid}/environ").st_mode & 0o077 == 0  # (only its user reads the environment)
    assert token.decode() not in server.log


def test_peer_port_refuses_clients_without_the_token_cleanly():
    with serve(*ARGS) as server:
        port = peer_ports(server)[1]
        token = token_of(frontends(server)[0])
        for path in (b"/local/stats", b"/local/metrics"):
            assert status(raw(port, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")) == 403
            wrong = b"x-pytriton-peer-token: " + b"0" * len(token) + b"\r\n"
            assert status(raw(port, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + wrong + b"\r\n")) == 403
        # a token header with bytes that are not ASCII: refused like any wrong token (not an internal error)
        odd = b"GET /local/stats HTTP/1.1\r\nHost: x\r\nx-pytriton-peer-token: \xe9" + token[1:] + b"\r\n\r\n"
        assert status(raw(port, odd)) == 403
        # shared memory cannot be registered without the token
        order = b'{"action":"register","kind":"system","name":"r","args":["/r",0,8]}'
        answer = raw(port, b"POST /local/shm HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(order), order))
        assert status(answer) == 403
        # a huge body is dropped as it comes, not held in memory (413: past the peer port's small body limit)
        huge = b"POST /local/shm HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n" + b"x" * 50_000_000
        answer = raw(port, huge, timeout_s=30)
        assert status(answer) == 413, answer
        # a malformed order from a process that has the token is a clear 400, not an internal error
        for body in (b"not json", b'{"action":"register"}', b"[1,2]"):
            head = b"POST /local/shm HTTP/1.1\r\nHost: x\r\nx-pytriton-peer-token: %s\r\nContent-Length: %d\r\n\r\n"
            answer = raw(port, head % (token, len(body)) + body)
            assert status(answer) == 400, answer
        assert "Traceback" not in server.log and "HTTP handler failed" not in server.log, server.log
        # the group serves on, from both processes
        assert set(infer_over_new_connections(server, 24)) == set(frontends(server).values())
        http = httpclient.InferenceServerClient(server.http_url)
        try:
            assert not http.get_system_shared_memory_status()
        finally:
            http.close()


def test_slowloris_and_many_connections_on_a_peer_port_leave_the_group_serving():
    with serve(*ARGS) as server:
        port = peer_ports(server)[1]
        held = []
        try:
            for _ in range(64):  # open connections that send half a head and stop
                conn = socket.create_connection(("127.0.0.1", port), timeout=10)
                conn.sendall(b"GET /local/stats HTTP/1.1\r\nHost: x\r\nx-pytr")
                held.append(conn)
            # the group's own use of the peer ports still works (statistics summed over both processes)
            assert set(infer_over_new_connections(server, 16)) == set(frontends(server).values())
            for _ in range(4):
                http = httpclient.InferenceServerClient(server.http_url)
                try:
                    assert http.get_inference_statistics(MODEL)["model_stats"][0]["inference_count"] == 16
                finally:
                    http.close()
        finally:
            for conn in held:
                conn.close()


def _count(text: str) -> float:
    match = re.search(rf'^nv_inference_count{{model="{MODEL}",version="1"}} (\S+)$', text, re.MULTILINE)
    assert match, text
    return float(match.group(1))


def _stats_from_process_0(server: ServerProcess, frontend0: int, version: str = "") -> int:
    """inference_count as answered over a connection that reached process 0 (new connections until one does)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        client = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
        try:  # (a connection that reached the stopped process would wait: ask the server pid first, quickly)
            tensor = grpcclient.InferInput("IN", [1], "FP32")
            tensor.set_data_from_numpy(np.zeros(1, dtype=np.float32))
            try:
                pid = int(client.infer(MODEL, [tensor], client_timeout=2).as_numpy("SERVER")[0])
            except InferenceServerException:
                continue
            if pid == frontend0:
                return client.get_inference_statistics(MODEL, version, client_timeout=20).model_stats[0].inference_count
        finally:
            client.close()
    raise AssertionError("no connection reached process 0")


@pytest.mark.slow  # (~20 s: two peer timeouts)
def test_a_peer_that_stops_answering_does_not_make_counters_go_back():
    """Process 1 stopped (SIGSTOP): the metrics and statistics answered by process 0 keep its last known share
    (counters never go back: Prometheus would read a reset), within the peer timeout."""
    with serve(*ARGS) as server:
        pids = frontends(server)
        assert set(infer_over_new_connections(server, 24)) == set(pids.values())
        with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
            before = _count(response.read().decode())
        assert before == 24
        known = _stats_from_process_0(server, pids[0])  # (its probe requests counted too, 1 or more)
        assert known >= 25
        os.kill(pids[1], signal.SIGSTOP)
        try:
            started = time.monotonic()
            with urllib.request.urlopen(server.metrics_url, timeout=30) as response:
                during = _count(response.read().decode())
            assert time.monotonic() - started < 15
            assert during >= before
            served = _stats_from_process_0(server, pids[0])  # (its own probe request counted too)
            assert served >= known + 1
            # a question process 1 never answered before: an error naming it, not a sum without its share
            with pytest.raises(InferenceServerException, match="front-end process 1 did not answer"):
                _stats_from_process_0(server, pids[0], version="1")
        finally:
            os.kill(pids[1], signal.SIGCONT)
        assert server.wait_for_log("did not answer")


def test_a_registration_that_a_stopped_peer_did_not_confirm_is_refused_and_undone():
    name = f"pt_fe_stop_{os.getpid()}"
    region = shm.create_shared_memory_region(name, f"/{name}", 64)
    try:
        with serve(*ARGS) as server:
            pids = frontends(server)
            os.kill(pids[1], signal.SIGSTOP)
            try:
                answer = None
                for _ in range(20):  # a connection that reaches process 0 (the stopped one answers nothing)
                    client = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
                    try:
                        if client.is_server_live(client_timeout=2):
                            try:
                                client.register_system_shared_memory(name, f"/{name}", 64, client_timeout=30)
                                answer = "registered"
                            except InferenceServerException as exc:
                                answer = str(exc)
                            break
                    except InferenceServerException:
                        continue
                    finally:
                        client.close()
                assert answer is not None and "front-end process 1" in answer and "did not answer" in answer, answer
            finally:
                os.kill(pids[1], signal.SIGCONT)
            # once it answers again, no process holds the region (the registration was undone everywhere)
            deadline = time.monotonic() + 20
            while True:
                listed = set()
                for _ in range(12):
                    client = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
                    try:
                        listed |= {r.name for r in client.get_system_shared_memory_status().regions}
                    finally:
                        client.close()
                if not listed or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert not listed
            # and the client may register it now
            client = grpcclient.InferenceServerClient(server.grpc_url)
            try:
                client.register_system_shared_memory(name, f"/{name}", 64)
                client.unregister_system_shared_memory(name)
            finally:
                client.close()
    finally:
        shm.destroy_shared_memory_region(region)


def test_a_registration_too_large_for_the_peer_port_is_refused_and_undone_not_kept_in_one_process():
    """A region name of 70,000 characters (accepted by gRPC and by one process's registry) makes an order past the
    peer ports' body limit: the registration must not stay in the process that received it alone."""
    name = f"pt_fe_big_{os.getpid()}"
    region = shm.create_shared_memory_region(name, f"/{name}", 64)
    long_name = "r" * 70_000
    try:
        with serve(*ARGS) as server:
            client = grpcclient.InferenceServerClient(server.grpc_url)
            try:
                with pytest.raises(InferenceServerException, match="front-end process [01] answered 413"):
                    client.register_system_shared_memory(long_name, f"/{name}", 64)
            finally:
                client.close()
            assert listed_regions(server) == {()}  # no process lists it
    finally:
        shm.destroy_shared_memory_region(region)
