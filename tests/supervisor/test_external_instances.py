"""Instances hosted by another process (RemoteTriton / Triton.bind threads): what the server does when that
process dies, and when one of its calls outlives the execution timeout (issue 13, items 5 and 6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import RemoteTriton
from tests._support.model_calls import SLOW_PID
from tests._support.paths import REPO
from tests._support.processes import started_pids
from tests._support.serving import serve
from tests.supervisor import remote_user


def _x(value: float) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput("x", [4], "FP32")
    tensor.set_data_from_numpy(np.full(4, value, dtype=np.float32))
    return tensor


def _ready(http_url: str, model: str) -> bool:
    try:
        return urllib.request.urlopen(f"http://{http_url}/v2/models/{model}/ready", timeout=5).status == 200
    except urllib.error.HTTPError:
        return False


def test_requests_to_a_model_whose_hosting_process_died_fail_at_once():
    """The instances of a RemoteTriton process that died cannot come back: requests used to wait in the queue until
    their deadline (forever without one); they now fail at once with UNAVAILABLE naming the model."""
    with serve("tests.models:slow_pid", *SLOW_PID) as server:
        user = subprocess.Popen([sys.executable, "-m", "tests.supervisor.remote_user", f"http://{server.http_url}"],
                                cwd=REPO, stdout=subprocess.PIPE, text=True)
        started_pids.add(user.pid)
        try:
            assert user.stdout is not None and user.stdout.readline().strip() == "READY"
            client = grpcclient.InferenceServerClient(server.grpc_url)
            assert client.infer("remote", [_x(1)]).as_numpy("y").tolist() == [2, 2, 2, 2]
        finally:
            os.kill(user.pid, signal.SIGKILL)
            user.wait()
            user.stdout.close()
        deadline = time.monotonic() + 20
        while _ready(server.http_url, "remote") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _ready(server.http_url, "remote")
        with pytest.raises(InferenceServerException) as info:
            client.infer("remote", [_x(1)], client_timeout=10)
        assert info.value.status() == "StatusCode.UNAVAILABLE", str(info.value)
        assert "remote" in info.value.message()


def test_a_bound_call_past_the_execution_timeout_never_writes_into_a_region_it_no_longer_holds():
    """A bound callable (a thread of the user's process) cannot be killed: its timed-out request failed and released
    its regions at once, the client unregistered and reused its output region, and when the call returned the
    worker loop wrote the outputs over the client's memory. The server now sends the call a CANCEL on expiry, and a
    worker writes nothing into client regions for a call it was told to drop; and the region stays registered (held)
    until the stuck call has returned, as a worker past its last look for a CANCEL may still write (issue 40)."""
    with serve("tests.models:slow_pid", "--execution-timeout", "1", *SLOW_PID) as server:
        remote = RemoteTriton(url=f"http://{server.http_url}")
        remote_user.bind(remote, "sleepy")
        key = f"/pt_attack_{uuid.uuid4().hex[:8]}"
        region = shm.create_shared_memory_region("out", key, 16)
        try:
            with remote:
                client = grpcclient.InferenceServerClient(server.grpc_url)
                client.register_system_shared_memory("out", key, 16)
                output = grpcclient.InferRequestedOutput("y")
                output.set_shared_memory("out", 16)
                with pytest.raises(InferenceServerException, match="execution timeout of 1 s"):
                    client.infer("sleepy", [_x(3)], outputs=[output])  # the callable sleeps 3 s
                client.unregister_system_shared_memory("out")  # (succeeds at once, as in Triton)
                listed = client.get_system_shared_memory_status(as_json=True)
                assert "out" in listed.get("regions", {}), listed  # held while the stuck call may write
                shm.set_shared_memory_region(region, [np.full(4, -7, dtype=np.float32)])  # the client reuses it
                deadline = time.monotonic() + 30
                while client.get_system_shared_memory_status(as_json=True) not in ({}, {"regions": []}):
                    assert time.monotonic() < deadline, "the region is still held 30 s after the timeout"
                    time.sleep(0.05)  # (until the stuck call returns: its hold ends and the region goes)
                assert shm.get_contents_as_numpy(region, np.float32, [4]).tolist() == [-7, -7, -7, -7]
        finally:
            shm.destroy_shared_memory_region(region)


def _exits_on_two(requests):
    """y = 2 x; raises SystemExit (user code calling sys.exit()) when x[0] == 2."""
    if requests[0]["x"][0] == 2:
        raise SystemExit(3)
    return [{"y": request["x"] * 2} for request in requests]


class _Interrupted(BaseException):
    """Not an Exception, like asyncio.CancelledError or GeneratorExit, and not a request to exit."""


def _interrupted_on_three(requests):
    """y = 2 x; raises _Interrupted when x[0] == 3."""
    if requests[0]["x"][0] == 3:
        raise _Interrupted("gave up on this one")
    return [{"y": request["x"] * 2} for request in requests]


def _remote_exits(http_url: str, fn: Callable = _exits_on_two) -> RemoteTriton:
    """A RemoteTriton (threads of this process) serving `fn` (`_exits_on_two`) as model 'exits'."""
    remote = RemoteTriton(url=f"http://{http_url}")
    remote.bind("exits", fn, inputs=[Tensor(name="x", shape=(4,), dtype=np.float32)],
                outputs=[Tensor(name="y", shape=(4,), dtype=np.float32)],
                config=ModelConfig(batching=False))
    return remote


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the hosting thread's SystemExit
def test_a_bound_callable_that_exits_fails_its_call_and_the_model_is_not_ready():
    """SystemExit (a sys.exit() in user code) ended the hosting thread silently: the call in flight waited for its
    deadline, and the instance stayed in service until a send to it found nobody. The call is now answered with the
    error, and the thread tells the server (FATAL) as it ends, which takes the instance out of service at once."""
    with serve("tests.models:slow_pid", *SLOW_PID) as server:
        remote = _remote_exits(server.http_url)
        with remote:
            client = grpcclient.InferenceServerClient(server.grpc_url)
            assert client.infer("exits", [_x(1)]).as_numpy("y").tolist() == [2, 2, 2, 2]
            with pytest.raises(InferenceServerException) as info:
                client.infer("exits", [_x(2)], client_timeout=3)
            assert info.value.status() != "StatusCode.DEADLINE_EXCEEDED", "the call in flight was never answered"
            assert "SystemExit: 3" in info.value.message()
            deadline = time.monotonic() + 10
            while _ready(server.http_url, "exits") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _ready(server.http_url, "exits")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the hosting thread's SystemExit
def test_a_bound_thread_found_gone_is_taken_out_of_service():
    """Once the server finds a bound worker's thread gone (a send to it reaches nobody), the instance leaves: the
    model reports not ready and requests fail at once naming it. They used to be sent to it and fail with 'not
    connected' one by one while the model reported ready."""
    with serve("tests.models:slow_pid", *SLOW_PID) as server:
        remote = _remote_exits(server.http_url)
        with remote:
            client = grpcclient.InferenceServerClient(server.grpc_url)
            with pytest.raises(InferenceServerException):
                client.infer("exits", [_x(2)], client_timeout=1)  # ends the thread (see the test above)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    client.infer("exits", [_x(1)], client_timeout=10)
                except InferenceServerException as exc:
                    if not _ready(server.http_url, "exits"):
                        assert exc.status() == "StatusCode.UNAVAILABLE" and "exits" in exc.message(), str(exc)
                        break
                time.sleep(0.1)
            assert not _ready(server.http_url, "exits")
            with pytest.raises(InferenceServerException) as info:
                client.infer("exits", [_x(1)], client_timeout=10)
            assert info.value.status() == "StatusCode.UNAVAILABLE" and "is gone" in info.value.message()


def test_a_bound_callable_raising_another_base_exception_fails_its_call_and_the_thread_serves_on():
    """A BaseException that is neither SystemExit nor KeyboardInterrupt answers its call like any error, and the
    hosting thread keeps serving (it used to end, silently)."""
    with serve("tests.models:slow_pid", *SLOW_PID) as server, _remote_exits(server.http_url, _interrupted_on_three):
        client = grpcclient.InferenceServerClient(server.grpc_url)
        with pytest.raises(InferenceServerException) as info:
            client.infer("exits", [_x(3)], client_timeout=10)
        assert "_Interrupted: gave up on this one" in info.value.message()
        assert client.infer("exits", [_x(1)], client_timeout=10).as_numpy("y").tolist() == [2, 2, 2, 2]
        assert _ready(server.http_url, "exits")
