"""Client shared-memory registrations racing across the processes of `pytriton serve --frontend-processes 2`
(docs/multi-frontend.md, "Client shared memory"): answered as one Triton server answers them, the regions the
same on every connection afterwards.

Each race is made deterministic with the group's test gate (PYTRITON_TEST_PEER_ORDER_GATE): every shared-memory
order a process receives from a peer waits until the test releases it, once both clients' requests are on their
way; the clients reach the processes chosen for them (their own gRPC connections)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tests._support.serving import ServerProcess, serve, tensor_args
from tests._support.waits import holds_within
from tests.abuse._frontend_group import FRONTEND_RE, OWN_CONNECTION

ARGS = ["tests.frontend_models:server_pid", *tensor_args("input", [("IN", "fp32", "-1")]),
        *tensor_args("output", [("OUT", "fp32", "-1"), ("SERVER", "int64", "1")]), "--frontend-processes", "2"]
GATE_ENV = "PYTRITON_TEST_PEER_ORDER_GATE"


def client_on(server: ServerProcess, pid: int) -> grpcclient.InferenceServerClient:
    """A gRPC client whose connection reached the front-end process `pid` (new connections until one does)."""
    for _ in range(100):
        client = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
        tensor = grpcclient.InferInput("IN", [1], "FP32")
        tensor.set_data_from_numpy(np.zeros(1, dtype=np.float32))
        if int(client.infer("server_pid", [tensor], client_timeout=10).as_numpy("SERVER")[0]) == pid:
            return client
        client.close()
    raise AssertionError(f"no connection reached front-end process {pid}")


def regions_by_process(server: ServerProcess, pids: dict[int, int]) -> dict[int, set[tuple[str, str]]]:
    """The system regions (name, key) each front-end process lists."""
    found = {}
    for index, pid in pids.items():
        client = client_on(server, pid)
        try:
            found[index] = {(r.name, r.key) for r in client.get_system_shared_memory_status().regions.values()}
        finally:
            client.close()
    return found


def race(gate: Path, calls: dict[int, object]) -> dict[int, str]:
    """Run `calls` (one per process index) at once; release the gate once two orders wait there; their answers."""
    answers: dict[int, str] = {}

    def run(index: int) -> None:
        try:
            calls[index]()
            answers[index] = "ok"
        except InferenceServerException as exc:
            answers[index] = str(exc)

    threads = [threading.Thread(target=run, args=(index,)) for index in calls]
    for thread in threads:
        thread.start()
    try:
        assert holds_within(lambda: len(list(gate.glob("held-*"))) >= 2, 20), list(gate.iterdir())
    finally:
        (gate / "release").touch()
        for thread in threads:
            thread.join(60)
    return answers


def test_the_same_name_registered_through_two_processes_at_once_the_first_wins(tmp_path):
    """Triton: one of two registrations of the same name succeeds and stays, the other gets 'already in manager'
    (before the registration lock: both were refused and neither stayed)."""
    name = f"pt_fe_same_{os.getpid()}"
    keys = {0: f"/{name}_a", 1: f"/{name}_b"}
    made = [shm.create_shared_memory_region(f"{name}_{i}", keys[i], 64) for i in (0, 1)]
    try:
        with serve(*ARGS, env={GATE_ENV: str(tmp_path)}) as server:
            pids = {int(i): int(p) for i, p in FRONTEND_RE.findall(server.log)}
            clients = {i: client_on(server, pids[i]) for i in (0, 1)}
            try:
                answers = race(tmp_path, {
                    i: (lambda i=i: clients[i].register_system_shared_memory(name, keys[i], 64, client_timeout=30))
                    for i in (0, 1)})
            finally:
                for client in clients.values():
                    client.close()
            winners = [i for i, answer in answers.items() if answer == "ok"]
            assert len(winners) == 1, answers
            loser = 1 - winners[0]
            assert f"shared memory region '{name}' already in manager" in answers[loser], answers
            # the winner's region, on every process
            assert regions_by_process(server, pids) == {0: {(name, keys[winners[0]])}, 1: {(name, keys[winners[0]])}}
    finally:
        for region in made:
            shm.destroy_shared_memory_region(region)


@pytest.mark.parametrize(("register_through", "unregister"), [(0, "all"), (1, "name")])
def test_a_registration_racing_an_unregistration_through_another_process_leaves_one_answer(
        tmp_path, register_through, unregister):
    """A registration through one process and an unregistration (of all regions, or of that name) through the other
    at the same moment: both succeed and every process lists the same regions (before the registration lock: the
    region stayed in one process only)."""
    name = f"pt_fe_unreg_{os.getpid()}"
    region = shm.create_shared_memory_region(name, f"/{name}", 64)
    try:
        with serve(*ARGS, env={GATE_ENV: str(tmp_path)}) as server:
            pids = {int(i): int(p) for i, p in FRONTEND_RE.findall(server.log)}
            other = 1 - register_through
            clients = {i: client_on(server, pids[i]) for i in (0, 1)}
            removed = name if unregister == "name" else ""
            try:
                answers = race(tmp_path, {
                    register_through: lambda: clients[register_through].register_system_shared_memory(
                        name, f"/{name}", 64, client_timeout=30),
                    other: lambda: clients[other].unregister_system_shared_memory(removed, client_timeout=30)})
            finally:
                for client in clients.values():
                    client.close()
            assert answers == {0: "ok", 1: "ok"}, answers
            listed = regions_by_process(server, pids)
            assert listed[0] == listed[1] and listed[0] in (set(), {(name, f"/{name}")}), listed
    finally:
        shm.destroy_shared_memory_region(region)


@pytest.mark.slow  # (~35 s: process 0's order timeout)
def test_a_registration_process_0_does_not_run_in_time_is_refused_and_undone_after_it():
    """Process 0 stopped (SIGSTOP) while process 1 asks it to run a registration: after the order timeout the
    client gets an error naming process 0; once process 0 goes on, it runs the registration and then its undo, so
    no process keeps the region and the client may register it again."""
    name = f"pt_fe_order_{os.getpid()}"
    region = shm.create_shared_memory_region(name, f"/{name}", 64)
    try:
        with serve(*ARGS) as server:
            pids = {int(i): int(p) for i, p in FRONTEND_RE.findall(server.log)}
            client = client_on(server, pids[1])
            answer: list[str] = []

            def register() -> None:
                try:
                    client.register_system_shared_memory(name, f"/{name}", 64, client_timeout=90)
                    answer.append("registered")
                except InferenceServerException as exc:
                    answer.append(str(exc))

            os.kill(pids[0], signal.SIGSTOP)
            try:
                thread = threading.Thread(target=register)
                thread.start()
                assert server.wait_for_log("did not answer /local/order within 30 s", 60)  # (then asks for the undo)
            finally:
                os.kill(pids[0], signal.SIGCONT)
            thread.join(60)
            client.close()
            expected = (f"front-end process 0 did not answer within 30 s to the registration of shared memory region "
                        f"'{name}'; the registration was undone")
            assert len(answer) == 1 and expected in answer[0], answer
            assert "UNAVAILABLE" in answer[0], answer
            assert holds_within(lambda: regions_by_process(server, pids) == {0: set(), 1: set()}, 20)
            client = client_on(server, pids[1])
            try:
                client.register_system_shared_memory(name, f"/{name}", 64)
            finally:
                client.close()
            assert regions_by_process(server, pids) == {0: {(name, f"/{name}")}, 1: {(name, f"/{name}")}}
    finally:
        shm.destroy_shared_memory_region(region)
