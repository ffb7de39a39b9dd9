"""Requests that read and write client shared-memory regions, cancelled in every phase by short deadlines on a
model with two pipelined instances: afterwards the regions are unregistered for good (no stale status entry, no
worker still mapping them), ordinary requests work and nothing waits (the scheduler's claim in docs/security.md)."""

from __future__ import annotations

import random
import threading
import time
import uuid

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tests._support.metrics import pending_requests
from tests._support.serving import serve, tensor_args
from tests._support.waits import wait_until

IDENTITY = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")])
COUNT = 1 << 18  # 1 MiB of FP32


def _request(region_out: bool) -> tuple[list, list]:
    tensor = grpcclient.InferInput("IN_X", [COUNT], "FP32")
    tensor.set_shared_memory("in", COUNT * 4)
    output = grpcclient.InferRequestedOutput("OUT_X")
    if region_out:
        output.set_shared_memory("out", COUNT * 4)
    return [tensor], [output]


@pytest.mark.slow
def test_a_cancel_storm_on_shared_memory_leaves_no_region_behind():
    prefix = f"/pt_attack_{uuid.uuid4().hex[:8]}"
    with serve("tests.models:identity", "--instances", "2", *IDENTITY) as server:
        source = shm.create_shared_memory_region("in", f"{prefix}_in", COUNT * 4)
        target = shm.create_shared_memory_region("out", f"{prefix}_out", COUNT * 4)
        try:
            data = np.arange(COUNT, dtype=np.float32)
            shm.set_shared_memory_region(source, [data])
            client = grpcclient.InferenceServerClient(server.grpc_url)
            client.register_system_shared_memory("in", f"{prefix}_in", COUNT * 4)
            client.register_system_shared_memory("out", f"{prefix}_out", COUNT * 4)
            stop = time.monotonic() + 6
            unexpected: list[str] = []

            def storm(seed: int) -> None:
                rng = random.Random(seed)
                storm_client = grpcclient.InferenceServerClient(server.grpc_url)
                while time.monotonic() < stop:
                    inputs, outputs = _request(rng.random() < 0.5)
                    try:
                        storm_client.infer("identity", inputs, outputs=outputs,
                                           client_timeout=rng.choice((0.0005, 0.001, 0.003, 0.01, 0.05)))
                    except InferenceServerException as exc:
                        if "Deadline" not in str(exc):
                            unexpected.append(str(exc))
                storm_client.close()

            threads = [threading.Thread(target=storm, args=(i,)) for i in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert not unexpected, unexpected[:5]
            wait_until(lambda: pending_requests(server) == 0, "no request pending", 10)
            for region_out in (False, True):
                inputs, outputs = _request(region_out)
                result = client.infer("identity", inputs, outputs=outputs, client_timeout=20)
                if region_out:
                    assert (shm.get_contents_as_numpy(target, np.float32, [COUNT]) == data).all()
                else:
                    assert (result.as_numpy("OUT_X") == data).all()
            client.unregister_system_shared_memory("in")
            client.unregister_system_shared_memory("out")
            assert client.get_system_shared_memory_status(as_json=True) in ({}, {"regions": []})
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                mapped = [pid for pid in server.worker_pids() if prefix[1:] in open(f"/proc/{pid}/maps").read()]
                if not mapped:
                    break
                time.sleep(0.1)
            assert not mapped, f"workers {mapped} still map the unregistered regions"
            client.close()
        finally:
            shm.destroy_shared_memory_region(source)
            shm.destroy_shared_memory_region(target)
    assert "free of unknown slot" not in server.log and "Traceback" not in server.log
