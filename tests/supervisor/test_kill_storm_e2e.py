"""Workers SIGKILLed again and again under load: only the calls in flight on a killed worker fail (each naming its
instance), everything else is answered, nothing waits afterwards, and the statistics count what clients saw."""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import threading
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.metrics import pending_requests
from tests._support.model_calls import ADD_SUB, add_sub_inputs
from tests._support.processes import started_pids
from tests._support.serving import serve
from tests._support.waits import wait_until


@pytest.mark.slow
def test_workers_killed_under_load_fail_only_their_own_calls():
    with serve("examples.add_sub:add_sub", "--instances", "2", *ADD_SUB) as server:
        outcomes: collections.Counter = collections.Counter()
        failures: list[str] = []
        lock = threading.Lock()
        done = threading.Event()
        deadline = time.monotonic() + 120  # (only ends a broken run: the load stops after the last kill)

        def load() -> None:
            client = grpcclient.InferenceServerClient(server.grpc_url)
            while not done.is_set() and time.monotonic() < deadline:
                try:
                    client.infer("add_sub", add_sub_inputs(), client_timeout=30)
                    kind = "ok"
                except InferenceServerException as exc:
                    kind = "failed"
                    failures.append(f"{exc.status()} {exc.message()}")
                with lock:
                    outcomes[kind] += 1
            client.close()

        threads = [threading.Thread(target=load) for _ in range(8)]
        for thread in threads:
            thread.start()
        killed: list[int] = []
        rng = random.Random(0)
        for _ in range(5):
            # Each kill waits for the events it needs, not a pause: every killed worker has been restarted (its
            # successor said hello) and the load has been answered since the last kill.
            wait_until(lambda: len(server.worker_pids()) == 2 + len(killed), "the killed workers restarted")
            answered = outcomes["ok"]
            wait_until(lambda: outcomes["ok"] > answered, "calls answered since the last kill")
            victim = rng.choice([pid for pid in server.worker_pids() if pid not in killed])
            started_pids.add(victim)
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)
        wait_until(lambda: len(server.worker_pids()) == 2 + len(killed), "the killed workers restarted")
        done.set()
        for thread in threads:
            thread.join()
        kills = len(killed)
        assert kills >= 4 and outcomes["ok"] > 0
        assert outcomes["failed"] <= 2 * kills, (kills, outcomes, failures[:5])  # pipeline depth 2 per instance
        assert all(f.startswith("StatusCode.UNAVAILABLE") and "add_sub_0_" in f for f in failures), failures[:5]
        wait_until(lambda: pending_requests(server) == 0, "no request pending", 10)
        client = grpcclient.InferenceServerClient(server.grpc_url)
        for _ in range(20):
            result = client.infer("add_sub", add_sub_inputs(), client_timeout=30)
            assert (result.as_numpy("OUTPUT0") == 2 * np.arange(16)).all()
        client.close()
        url = f"http://{server.http_url}/v2/models/add_sub/stats"
        stats = json.loads(urllib.request.urlopen(url, timeout=10).read())["model_stats"][0]["inference_stats"]
        assert int(stats["success"]["count"]) == outcomes["ok"] + 20
        assert int(stats["fail"]["count"]) == outcomes["failed"]
