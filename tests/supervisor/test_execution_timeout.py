"""`--execution-timeout`: a hung execution fails its requests, its worker is killed and restarted, and the model
reports not ready until an instance can take work again (issue 13, item 5)."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.model_calls import SLOW_PID, pid_request
from tests._support.processes import pid_alive
from tests._support.serving import serve


def _ready(http_url: str) -> bool:
    try:
        return urllib.request.urlopen(f"http://{http_url}/v2/models/slow_pid/ready", timeout=5).status == 200
    except urllib.error.HTTPError:
        return False


def test_a_hung_execution_fails_and_its_worker_is_restarted():
    with serve("tests.models:slow_pid", "--execution-timeout", "1", *SLOW_PID) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        (old_pid,) = server.worker_pids()
        seen_not_ready = threading.Event()
        watching = True

        def watch() -> None:
            while watching:
                if not _ready(server.http_url):
                    seen_not_ready.set()
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        started = time.monotonic()
        try:
            with pytest.raises(InferenceServerException) as info:
                pid_request(client, sleep=60)
            took = time.monotonic() - started
            deadline = time.monotonic() + 30
            while len(server.worker_pids()) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            while not _ready(server.http_url) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            watching = False
            watcher.join()
        message = str(info.value)
        assert "slow_pid" in message and "execution timeout of 1 s" in message, message
        assert took < 30
        assert seen_not_ready.is_set()  # while the only instance restarted, the model said so
        new_pid = server.worker_pids()[-1]
        assert new_pid != old_pid and not pid_alive(old_pid)
        assert int(pid_request(client).as_numpy("PID")[0]) == new_pid
        assert "did not finish an execution within the execution timeout" in server.log
