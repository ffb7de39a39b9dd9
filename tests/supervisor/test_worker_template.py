"""Workers forked from the worker template (pytriton/supervisor/template.py): each is still a process of its own that
nothing done in another worker reaches, a template that dies is replaced while the server serves, GPU pinning is in
place before the model's code is imported, and the template can be turned off (or refused by a model)."""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._fake_nvml import fake_gpus, fake_nvml_env
from tests._support.processes import pid_alive
from tests._support.serving import ServerProcess, serve
from tests._support.shm import shm_segments_of
from tests._support.waits import wait_until

PROBE = textwrap.dedent('''\
    """Answers STATE: what its worker process sees (pid, parent, threads, a global of numpy, its environment when
    this file was imported); ACTION makes it leak a thread, change that global, sleep, or abort."""
    import json
    import os
    import threading
    import time

    import numpy as np
    import triton_python_backend_utils as pb_utils

    import sys


    def loaded_cuda():
        with open("/proc/self/maps") as maps:
            libraries = {line.split()[-1].rsplit("/", 1)[-1] for line in maps if "/" in line}
        return sorted({name for name in libraries if name.startswith(("libcuda", "libcudart", "libnvidia"))}
                      | {name for name in ("torch", "cupy", "tensorflow", "jax", "cuda") if name in sys.modules})


    AT_IMPORT = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "cuda": loaded_cuda()}


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                action = pb_utils.get_input_tensor_by_name(request, "ACTION").as_numpy()[0].decode()
                if action == "thread":
                    threading.Thread(target=threading.Event().wait, daemon=True).start()
                elif action == "global":
                    np.pytriton_probe = os.getpid()
                elif action.startswith("sleep "):
                    time.sleep(float(action.split()[1]))
                elif action == "abort":
                    os.abort()
                state = {"pid": os.getpid(), "ppid": os.getppid(), "threads": threading.active_count(),
                         "global": getattr(np, "pytriton_probe", None), "at_import": AT_IMPORT}
                out = np.array([json.dumps(state).encode()], dtype=np.object_)
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("STATE", out)]))
            return responses
''')


def _config(name: str, extra: str = "") -> str:
    return textwrap.dedent(f'''\
        name: "{name}"
        backend: "python"
        input [{{ name: "ACTION" data_type: TYPE_STRING dims: [ 1 ] }}]
        output [{{ name: "STATE" data_type: TYPE_STRING dims: [ 1 ] }}]
        ''') + extra


def _repository(root: Path, models: dict[str, str]) -> Path:
    """A model repository of probe models: {name: extra config.pbtxt text}."""
    for name, extra in models.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(PROBE)
        (root / name / "config.pbtxt").write_text(_config(name, extra))
    return root


def _state(client: grpcclient.InferenceServerClient, model: str, action: str = "") -> dict:
    tensor = grpcclient.InferInput("ACTION", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([action.encode()], dtype=np.object_))
    return json.loads(client.infer(model, [tensor], client_timeout=60).as_numpy("STATE")[0])


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def _environ(pid: int) -> dict[bytes, bytes]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)


def _restarted(server: ServerProcess, pid: int, how: str) -> None:
    """Wait until the server saw worker `pid` end (`how`) and started its successor."""
    before = len(server.worker_pids())
    assert server.wait_for_log(f"(pid {pid}) {how}; restarting it", timeout_s=30), server.log
    assert server.wait_for_log("started (pid", timeout_s=30)
    wait_until(lambda: len(server.worker_pids()) > before, "the restarted worker", timeout_s=30)


def test_workers_are_forked_from_the_template_and_look_like_fresh_ones(tmp_path):
    repository = _repository(tmp_path, {"a": "", "b": ""})
    with serve("--model-repository", str(repository)) as server:
        (template,) = server.template_pids()
        client = grpcclient.InferenceServerClient(server.grpc_url)
        a, b = _state(client, "a"), _state(client, "b")
        assert sorted(server.worker_pids()) == sorted([a["pid"], b["pid"]])
        assert a["ppid"] == b["ppid"] == template  # forked from the template ...
        server_pid = _parent(template)  # ... which the server started
        assert "pytriton" in Path(f"/proc/{server_pid}/cmdline").read_bytes().decode()
        for worker in (a, b):  # as operators and scripts/wire see a worker: its command line and environment
            assert b"pytriton.backends.worker" in Path(f"/proc/{worker['pid']}/cmdline").read_bytes()
            assert b"PYTRITON_TEMPLATE_ENV_ROOM" not in b"".join(_environ(worker["pid"]))


def test_a_forked_worker_is_isolated(tmp_path):
    """A leaked thread, a changed global, an abort, a SIGKILL, a hang past the execution timeout: none reaches the
    other worker or the template (the workers forked afterwards are as the first ones were)."""
    repository = _repository(tmp_path, {"a": "", "b": ""})
    with serve("--model-repository", str(repository), "--execution-timeout", "2") as server:
        (template,) = server.template_pids()
        template_threads = _threads(template)
        client = grpcclient.InferenceServerClient(server.grpc_url)
        a0, b0 = _state(client, "a"), _state(client, "b")
        assert a0["global"] is None and a0["threads"] == b0["threads"]

        leaked = _state(client, "a", "thread")
        changed = _state(client, "a", "global")
        assert leaked["threads"] == a0["threads"] + 1 and changed["global"] == a0["pid"]
        b1 = _state(client, "b")
        assert (b1["pid"], b1["threads"], b1["global"]) == (b0["pid"], b0["threads"], None)

        os.kill(a0["pid"], signal.SIGKILL)
        _restarted(server, a0["pid"], "was killed by SIGKILL")
        a1 = _state(client, "a")
        assert a1["pid"] != a0["pid"] and a1["ppid"] == template
        assert (a1["threads"], a1["global"]) == (a0["threads"], None)  # the template never saw either change
        assert shm_segments_of({a0["pid"]}) == []

        with pytest.raises(InferenceServerException):
            _state(client, "a", "abort")
        _restarted(server, a1["pid"], "was killed by SIGABRT")
        with pytest.raises(InferenceServerException) as hung:
            _state(client, "b", "sleep 120")
        assert "timeout" in hung.value.message().lower() or "timed out" in hung.value.message().lower()
        _restarted(server, b0["pid"], "was killed by SIGKILL")

        a2, b2 = _state(client, "a"), _state(client, "b")
        assert a2["ppid"] == b2["ppid"] == template and a2["pid"] != a1["pid"] and b2["pid"] != b0["pid"]
        assert (a2["threads"], a2["global"], b2["threads"], b2["global"]) == (a0["threads"], None, b0["threads"], None)
        assert server.template_pids() == [template] and pid_alive(template)
        assert _threads(template) == template_threads


def test_a_template_that_dies_is_restarted_and_the_server_keeps_serving(tmp_path):
    repository = _repository(tmp_path, {"a": "", "b": ""})
    with serve("--model-repository", str(repository)) as server:
        (template,) = server.template_pids()
        client = grpcclient.InferenceServerClient(server.grpc_url)
        a0, b0 = _state(client, "a"), _state(client, "b")
        os.kill(template, signal.SIGKILL)
        assert server.wait_for_log(f"worker template (pid {template}) was killed by SIGKILL; starting a new one")
        wait_until(lambda: len(server.template_pids()) == 2, "the new template", timeout_s=30)
        new_template = server.template_pids()[-1]
        assert _state(client, "a")["pid"] == a0["pid"]  # its workers serve on
        os.kill(a0["pid"], signal.SIGKILL)  # a worker of the dead template: its exit status went with the template
        _restarted(server, a0["pid"],
                   "exited (its exit status is unknown: the worker template that forked it is gone)")
        a1 = _state(client, "a")
        assert a1["ppid"] == new_template
        assert _state(client, "b")["pid"] == b0["pid"]
        assert client.is_server_ready()


def test_gpu_pinning_is_set_before_the_models_code_is_imported(tmp_path):
    """CUDA_VISIBLE_DEVICES, as the faked GPU discovery places the instance, is what the model's module sees when it
    is imported, and no CUDA library was loaded before it (the template loads none)."""
    gpus = fake_gpus(2)
    repository = _repository(tmp_path, {"g": 'instance_group [{ kind: KIND_GPU gpus: [ 1 ] }]\n'})
    with serve("--model-repository", str(repository), env=fake_nvml_env(gpus)) as server:
        (template,) = server.template_pids()
        state = _state(grpcclient.InferenceServerClient(server.grpc_url), "g")
        assert state["ppid"] == template
        assert state["at_import"] == {"cuda_visible_devices": gpus[1]["uuid"], "cuda": []}
        assert _environ(state["pid"])[b"CUDA_VISIBLE_DEVICES"] == gpus[1]["uuid"].encode()
        assert _environ(template)[b"CUDA_VISIBLE_DEVICES"] == b"0,1"  # (the server's: the pin is the worker's own)


def test_a_model_that_asks_for_a_fresh_interpreter_gets_one(tmp_path):
    repository = _repository(tmp_path, {
        "a": "",
        "fresh": 'parameters { key: "PYTRITON_WORKER_START" value: { string_value: "fresh" } }\n',
    })
    with serve("--model-repository", str(repository)) as server:
        (template,) = server.template_pids()
        client = grpcclient.InferenceServerClient(server.grpc_url)
        assert _state(client, "a")["ppid"] == template
        fresh = _state(client, "fresh")
        assert fresh["ppid"] == _parent(template)  # the server's own child
        assert ("model instance 'fresh_0' starts in a fresh interpreter, not from the worker template: its "
                "configuration sets parameter PYTRITON_WORKER_START to 'fresh'") in server.log


def test_the_template_can_be_turned_off(tmp_path):
    repository = _repository(tmp_path, {"a": ""})
    with serve("--model-repository", str(repository), env={"PYTRITON_WORKER_TEMPLATE": "0"}) as server:
        assert server.template_pids() == []
        state = _state(grpcclient.InferenceServerClient(server.grpc_url), "a")
        assert b"pytriton.backends.worker" in Path(f"/proc/{state['pid']}/cmdline").read_bytes()
        assert b"pytriton" in Path(f"/proc/{state['ppid']}/cmdline").read_bytes()
        assert b"backends.template" not in Path(f"/proc/{state['ppid']}/cmdline").read_bytes()
