"""GPUs as Triton treats them, on a machine without one: discovery is faked (tests/_fake_nvml), the rest is real.

`pytriton serve ... --instances 2 --gpus 0,1` is refused with the visible GPUs named when none exist, and serves
on two KIND_GPU groups when discovery reports two: each worker pinned to its GPU, nv_gpu_* on /metrics.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests._fake_nvml import fake_gpus, fake_nvml_env
from tests._support.metrics import samples, scrape
from tests._support.paths import REPO
from tests._support.serving import serve, tensor_args

TENSORS = tensor_args("input", [("IN_X", "int8", "1")]) + tensor_args("output", [("DEVICES", "bytes", "1")])
# The mission's command as typed: the module declares its tensors, batching and device (no tensor flags).
MISSION = ["tests.cli_targets.mission:infer_fn", "--instances", "2", "--gpus", "0,1"]
GPU_METRICS = ("nv_gpu_utilization", "nv_gpu_memory_total_bytes", "nv_gpu_memory_used_bytes", "nv_gpu_power_usage",
               "nv_gpu_power_limit", "nv_energy_consumption")


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """`python -m pytriton.cli serve ARGS` to its end (a refused command exits before it listens)."""
    return subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", *args, "--grpc-port", "0", "--http-port",
                           "0", "--metrics-port", "0", "--grpc-address", "127.0.0.1", "--http-address", "127.0.0.1",
                           "--metrics-address", "127.0.0.1"],
                          cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False)


def answered_device(url: str, model: str, shape: tuple[int, ...] = (1,)) -> bytes:
    """CUDA_VISIBLE_DEVICES of the worker that answers one inference (the callable returns it)."""
    tensor = grpcclient.InferInput("IN_X", list(shape), "INT8")
    tensor.set_data_from_numpy(np.zeros(shape, dtype=np.int8))
    with grpcclient.InferenceServerClient(url) as client:
        return client.infer(model, [tensor]).as_numpy("DEVICES").reshape(-1)[0]


def workers_cuda_visible_devices(server) -> list[str]:
    """CUDA_VISIBLE_DEVICES each worker process was started with (from /proc/<pid>/environ), sorted."""
    found = []
    for pid in server.worker_pids():
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        found.append(env[b"CUDA_VISIBLE_DEVICES"].decode())
    return sorted(found)


@pytest.mark.parametrize("devices", [[], None], ids=["nvml-reports-none", "no-nvml-library"])
def test_the_mission_command_is_refused_without_gpus(devices):
    result = run_cli(MISSION, fake_nvml_env(devices))
    assert result.returncode == 2, result.stderr
    assert ("Invalid value for --gpus: instance group infer_fn_0 of model infer_fn specifies "
            "invalid or unsupported gpu id 0. Visible GPUs: none (no NVIDIA GPU was found") in result.stderr
    # the module declares device="gpu": without --gpus it would still want one, so --device cpu is the way
    assert "hides them); drop --gpus and give --device cpu to run on CPU" in result.stderr
    assert "Started" not in result.stderr  # refused before anything started


@pytest.mark.parametrize("gpus, message", [
    ("0,0", "instance group visible_devices_0 of model visible_devices repeats gpu id 0. Visible GPUs: "
            "0 (Fake GPU 0, GPU-0aaaaaaa-0000-4000-8000-000000000000), 1 (Fake GPU 1, "),
    ("-1", "specifies invalid or unsupported gpu id -1. Visible GPUs: 0 (Fake GPU 0,"),
    ("5", "instance group visible_devices_5 of model visible_devices specifies invalid or unsupported gpu id 5. "
          "Visible GPUs: 0 (Fake GPU 0,"),
    ("0,x", "GPU ids are comma-separated integers (or 'all'), got '0,x'"),
])
def test_gpu_ids_that_cannot_be_used_are_refused(gpus, message):
    result = run_cli(["tests.models:visible_devices", "--gpus", gpus, *TENSORS], fake_nvml_env(fake_gpus(2)))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


def test_gpus_all_without_gpus_is_refused():
    result = run_cli(["tests.models:visible_devices", "--gpus", "all", *TENSORS], fake_nvml_env([]))
    assert result.returncode == 2, result.stderr
    assert ("instance group visible_devices_gpus of model visible_devices has kind KIND_GPU but no GPUs are "
            "available") in result.stderr
    assert "; drop --gpus to run on CPU" in result.stderr


def test_the_mission_command_serves_on_two_gpus():
    gpus = fake_gpus(2)
    uuids = [g["uuid"] for g in gpus]
    # GPU gauges read at most every millisecond (--metrics-interval-ms): each of two scrapes reads NVML
    with serve(*MISSION, "--metrics-interval-ms", "1", env=fake_nvml_env(gpus)) as server:
        assert len(server.worker_pids()) == 4
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            config = client.get_model_config("infer_fn", as_json=True)["config"]
        groups = [(g["name"], g["kind"], g["count"], g["gpus"]) for g in config["instance_group"]]
        assert groups == [("infer_fn_0", "KIND_GPU", 2, [0]), ("infer_fn_1", "KIND_GPU", 2, [1])]
        assert workers_cuda_visible_devices(server) == [uuids[0], uuids[0], uuids[1], uuids[1]]
        wanted = {u.encode() for u in uuids}
        assert answered_device(server.grpc_url, "infer_fn", (1, 1)) in wanted  # what the callable itself sees
        with httpclient.InferenceServerClient(server.http_url) as client:
            tensor = httpclient.InferInput("IN_X", [2, 1], "INT8")
            tensor.set_data_from_numpy(np.zeros((2, 1), dtype=np.int8))
            assert set(client.infer("infer_fn", [tensor]).as_numpy("DEVICES").reshape(-1)) <= wanted
        with grpc.insecure_channel(server.grpc_url) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING

        first = samples(scrape(server))
        time.sleep(0.002)  # past the 1 ms interval since the first scrape read NVML (it reads before it answers)
        second = samples(scrape(server))
        for i, gpu in enumerate(gpus):
            label = (("gpu_uuid", gpu["uuid"]),)
            for name in GPU_METRICS:
                assert (name, label) in first, f"{name} for GPU {i} missing"
            assert first[("nv_gpu_utilization", label)] == gpu["utilization"] / 100
            assert first[("nv_gpu_memory_total_bytes", label)] == gpu["memory_total"]
            assert first[("nv_gpu_memory_used_bytes", label)] == gpu["memory_used"]
            assert first[("nv_gpu_power_usage", label)] == gpu["power_mw"] / 1000
            assert first[("nv_gpu_power_limit", label)] == gpu["power_limit_mw"] / 1000
            # joules since the server started: the fake GPU draws 1 J between two readings
            assert second[("nv_energy_consumption", label)] == first[("nv_energy_consumption", label)] + 1 > 0
        up = {dict(labels)["instance"]: (dict(labels)["kind"], dict(labels)["gpu"], dict(labels)["gpu_uuid"], value)
              for (name, labels), value in first.items() if name == "pytriton_model_instance_up"}
        # instances named as Triton names them: <instance group>_<index in the group>
        assert up == {f"infer_fn_{g}_{k}": ("KIND_GPU", str(g), uuids[g], 1) for g in (0, 1) for k in (0, 1)}


def test_a_model_declared_for_gpu_goes_on_every_gpu_without_gpus_flag():
    """Triton's default for a KIND_GPU instance group without gpus: the instances on each visible GPU."""
    gpus = fake_gpus(2)
    with serve("tests.cli_targets.mission:infer_fn", env=fake_nvml_env(gpus)) as server:
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            config = client.get_model_config("infer_fn", as_json=True)["config"]
        assert [(g["kind"], g["count"], g["gpus"]) for g in config["instance_group"]] == [
            ("KIND_GPU", 1, [0]), ("KIND_GPU", 1, [1])]
        assert workers_cuda_visible_devices(server) == sorted(g["uuid"] for g in gpus)


def test_a_model_declared_for_gpu_is_refused_where_there_is_none():
    result = run_cli(["tests.cli_targets.mission:infer_fn"], fake_nvml_env([]))
    assert result.returncode == 2, result.stderr
    assert ("Error: model 'infer_fn' is declared for GPU (device='gpu') but no GPU was found (neither NVML nor "
            "/proc/driver/nvidia/gpus lists one, or CUDA_VISIBLE_DEVICES hides them); serve it on CPU with --device "
            "cpu") in result.stderr, result.stderr
    assert "--gpus" not in result.stderr


def test_device_cpu_serves_a_model_declared_for_gpu_where_there_is_none():
    with serve("tests.cli_targets.mission:infer_fn", "--device", "cpu", env=fake_nvml_env([])) as server:
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            config = client.get_model_config("infer_fn", as_json=True)["config"]
        assert [g["kind"] for g in config["instance_group"]] == ["KIND_CPU"]
        inherited = os.environ.get("CUDA_VISIBLE_DEVICES", "").encode()
        assert answered_device(server.grpc_url, "infer_fn", (1, 1)) == inherited  # not pinned to a GPU


def test_cuda_visible_devices_renumbers_the_gpus_and_all_takes_every_visible_one():
    """With CUDA_VISIBLE_DEVICES=2,0 on three GPUs, visible GPU 0 is physical GPU 2 and 1 is 0: `--gpus all` is
    those two, each worker is told its physical device (by UUID), and id 2 no longer exists."""
    gpus = fake_gpus(3)
    env = fake_nvml_env(gpus, cuda_visible_devices="2,0")
    refused = run_cli(["tests.models:visible_devices", "--gpus", "2", *TENSORS], env)
    assert refused.returncode == 2
    assert (f"specifies invalid or unsupported gpu id 2. Visible GPUs: 0 (Fake GPU 2, {gpus[2]['uuid']}), "
            f"1 (Fake GPU 0, {gpus[0]['uuid']})") in refused.stderr
    with serve("tests.models:visible_devices", "--gpus", "all", *TENSORS, env=env) as server:
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            config = client.get_model_config("visible_devices", as_json=True)["config"]
        assert [(g["kind"], g["count"], g["gpus"]) for g in config["instance_group"]] == [
            ("KIND_GPU", 1, [0]), ("KIND_GPU", 1, [1])]
        assert workers_cuda_visible_devices(server) == sorted([gpus[2]["uuid"], gpus[0]["uuid"]])
        assert answered_device(server.grpc_url, "visible_devices") in {gpus[2]["uuid"].encode(),
                                                                       gpus[0]["uuid"].encode()}
        values = samples(scrape(server))
        pinned = {dict(labels)["gpu"]: dict(labels)["gpu_uuid"] for (name, labels), _ in values.items()
                  if name == "pytriton_model_instance_up"}
        assert pinned == {"0": gpus[2]["uuid"], "1": gpus[0]["uuid"]}
        # GPU metrics cover the visible GPUs only
        assert {dict(labels)["gpu_uuid"] for (name, labels), _ in values.items() if name == "nv_gpu_utilization"} \
            == {gpus[2]["uuid"], gpus[0]["uuid"]}
