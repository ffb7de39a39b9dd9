"""Client shared memory across the processes of `pytriton serve --frontend-processes 2`: unregistered (all) while
requests on both processes use the region, and a region whose object the client removes while the registration
is on its way to the other process. Answers as documented, status the same on every connection, nothing mapped
afterwards."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tests._support.serving import serve, tensor_args
from tests._support.waits import holds_within
from tests.abuse._frontend_group import FRONTEND_RE, OWN_CONNECTION, PEER_RE, connections_to, listed_regions

GATED = ["tests.models:gated_pid", *tensor_args("input", [("X", "int32", "1")]),
         *tensor_args("output", [("PID", "int64", "1")]), "--frontend-processes", "2"]


def _mapping(pids: list[int], key: str) -> list[int]:
    """The processes among `pids` that map /dev/shm/`key`."""
    found = []
    for pid in pids:
        with open(f"/proc/{pid}/maps") as f:
            if f"/dev/shm/{key}" in f.read():
                found.append(pid)
    return found


def test_unregister_all_while_both_processes_use_the_region(tmp_path):
    name = f"pt_fe_use_{os.getpid()}"
    region = shm.create_shared_memory_region(name, f"/{name}", 64)
    shm.set_shared_memory_region(region, [np.array([7], dtype=np.int32)])
    release = tmp_path / "release"
    try:
        with serve(*GATED) as server:
            pids = [int(p) for _, p in FRONTEND_RE.findall(server.log)] + server.worker_pids()
            client = grpcclient.InferenceServerClient(server.grpc_url)
            client.register_system_shared_memory(name, f"/{name}", 64)
            client.close()
            results: list[object] = []

            def call(i: int) -> None:
                c = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
                try:
                    x = grpcclient.InferInput("X", [1], "INT32")
                    x.set_shared_memory(name, 4)
                    c.infer("gated_pid", [x], client_timeout=60,
                            parameters={"started": str(tmp_path / f"started{i}"), "release": str(release)})
                    results.append("answered")
                except InferenceServerException as exc:
                    results.append(str(exc))
                finally:
                    c.close()

            threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
            for thread in threads:
                thread.start()
            assert holds_within(lambda: len(list(tmp_path.glob("started*"))) >= 2)  # both workers inside a request
            http = httpclient.InferenceServerClient(server.http_url)
            http.unregister_system_shared_memory()
            http.close()
            # awaiting removal while in use, as Triton lists it: the same on every connection
            assert listed_regions(server) == {(name,)}
            release.touch()
            for thread in threads:
                thread.join(60)
            assert results == ["answered"] * 8, results  # the requests that held the region completed
            assert holds_within(lambda: listed_regions(server) == {()})
            assert holds_within(lambda: not _mapping(pids, name)), _mapping(pids, name)  # no process maps it any more
    finally:
        shm.destroy_shared_memory_region(region)


def test_a_region_removed_while_its_registration_travels_is_refused_everywhere():
    """Process 1 is held (SIGSTOP) while the registration received by process 0 waits for it; the client removes
    the region's object; process 1 goes on, cannot open it, refuses: the registration is undone in process 0 and
    the client gets process 1's refusal."""
    name = f"pt_fe_gone_{os.getpid()}"
    region = shm.create_shared_memory_region(name, f"/{name}", 64)
    args = ["tests.frontend_models:server_pid", *tensor_args("input", [("IN", "fp32", "-1")]),
            *tensor_args("output", [("OUT", "fp32", "-1"), ("SERVER", "int64", "1")]), "--frontend-processes", "2"]
    try:
        with serve(*args) as server:
            pids = {int(i): int(p) for i, p in FRONTEND_RE.findall(server.log)}
            peer1 = int(dict(PEER_RE.findall(server.log))["1"])
            answer: list[str] = []
            os.kill(pids[1], signal.SIGSTOP)
            try:
                def register() -> None:
                    for _ in range(20):  # (a new connection until one reaches process 0)
                        client = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
                        try:
                            if not client.is_server_live(client_timeout=2):
                                continue
                        except InferenceServerException:
                            client.close()
                            continue
                        try:
                            client.register_system_shared_memory(name, f"/{name}", 64, client_timeout=30)
                            answer.append("registered")
                        except InferenceServerException as exc:
                            answer.append(str(exc))
                        finally:
                            client.close()
                        return

                thread = threading.Thread(target=register)
                thread.start()
                # the order waits in process 1's queue (after up to 20 connections of 2 s each: until one reached 0)
                assert holds_within(lambda: connections_to(peer1) > 0, 45)
                shm.destroy_shared_memory_region(region)  # (unlinks the object)
                region = None
            finally:
                os.kill(pids[1], signal.SIGCONT)
            thread.join(30)
            assert len(answer) == 1 and f"Unable to open shared memory region: '/{name}'" in answer[0], answer
            assert holds_within(lambda: listed_regions(server) == {()}), listed_regions(server)
    finally:
        if region is not None:
            shm.destroy_shared_memory_region(region)

