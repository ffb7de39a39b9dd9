"""Several instance groups in one model of `pytriton serve --model-repository`: one worker per instance of every
group, each with the name, kind and device Triton gives it (`args` of initialize(), CUDA_VISIBLE_DEVICES), and the
model configuration shows every group as Triton normalises it; checked with tritonclient (GPU discovery faked)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests._fake_nvml import fake_gpus, fake_nvml_env
from tests._support.clients import CLIENTS, client_for
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, real_tritonserver
from tests._support.serving import serve

# Each instance writes what it was given to <SEEN_DIR>/<pid>.json when it starts, and answers its instance name.
MODEL = """
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]
        seen = {key: args[key] for key in ("model_instance_name", "model_instance_kind", "model_instance_device_id")}
        seen["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
        with open(os.path.join(os.environ["SEEN_DIR"], f"{os.getpid()}.json"), "w") as f:
            json.dump(seen, f)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("NAME", np.array([self.name.encode()], dtype=np.object_))])
                for _ in requests]
"""

TENSORS = """
input [ { name: "X" data_type: TYPE_INT8 dims: [ 1 ] } ]
output [ { name: "NAME" data_type: TYPE_STRING dims: [ 1 ] } ]
"""

# What tritonserver 2.51 showed for this config (`instance_group` of the model configuration, and the args each
# instance's initialize() got: CPU instances, device id "0")
CPU_GROUPS = 'instance_group [ { count: 2, kind: KIND_CPU }, { count: 1, kind: KIND_CPU, name: "extra" }, { } ]'
TRITON_2_51_CPU_GROUPS = [("groups_0", "KIND_CPU", 2, []), ("extra", "KIND_CPU", 1, []), ("groups_2", "KIND_CPU", 1, [])]
TRITON_2_51_CPU_INSTANCES = {("groups_0_0", "CPU", "0"), ("groups_0_1", "CPU", "0"), ("extra_0", "CPU", "0"),
                             ("groups_2_0", "CPU", "0")}
FULL_GROUP = {"secondary_devices": [], "profile": [], "passive": False, "host_policy": ""}


def repository(root: Path, groups: str) -> Path:
    (root / "repo" / "groups" / "1").mkdir(parents=True)
    (root / "repo" / "groups" / "config.pbtxt").write_text('backend: "python"' + TENSORS + groups)
    (root / "repo" / "groups" / "1" / "model.py").write_text(MODEL)
    (root / "seen").mkdir()
    return root / "repo"


def seen(root: Path) -> set[tuple[str, str, str, str]]:
    found = [json.loads(path.read_text()) for path in (root / "seen").iterdir()]
    return {(s["model_instance_name"], s["model_instance_kind"], s["model_instance_device_id"],
             s["CUDA_VISIBLE_DEVICES"]) for s in found}


def shown(groups: list[dict]) -> list[tuple[str, str, int, list[int]]]:
    """(name, kind, count, GPU ids) of each group a model config shows (as JSON: absent fields are their defaults)."""
    return [(g["name"], g["kind"], int(g.get("count", 0)), [int(x) for x in g.get("gpus", [])]) for g in groups]


def names_answered(server, protocol: str, count: int) -> set[str]:
    client = client_for(server, protocol)
    tensor = CLIENTS[protocol].InferInput("X", [1], "INT8")
    tensor.set_data_from_numpy(np.zeros(1, dtype=np.int8))
    return {client.infer("groups", [tensor]).as_numpy("NAME")[0].decode() for _ in range(count)}


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_cpu_groups_each_start_their_instances_with_tritons_names(tmp_path, protocol):
    repo = repository(tmp_path, CPU_GROUPS)
    env = {"SEEN_DIR": str(tmp_path / "seen"), "CUDA_VISIBLE_DEVICES": ""}
    with serve("--model-repository", str(repo), env=env) as server:
        client = client_for(server, protocol)
        config = client.get_model_config("groups", as_json=True)["config"] if protocol == "grpc" else \
            client.get_model_config("groups")
        groups = config["instance_group"]
        assert [(g["name"], g["kind"], int(g["count"]), g.get("gpus", [])) for g in groups] == TRITON_2_51_CPU_GROUPS
        if protocol == "http":  # (gRPC's JSON leaves out empty and false fields)
            assert all({k: g[k] for k in FULL_GROUP} == FULL_GROUP for g in groups)
        assert len(server.worker_pids()) == 4
        assert {s[:3] for s in seen(tmp_path)} == TRITON_2_51_CPU_INSTANCES
        assert {s[3] for s in seen(tmp_path)} == {""}  # (the server's own, as given: no pin of their own)
        assert names_answered(server, protocol, 4) <= {name for name, _, _ in TRITON_2_51_CPU_INSTANCES}
        stats = client.get_inference_statistics("groups", as_json=True) if protocol == "grpc" else \
            client.get_inference_statistics("groups")
        assert int(stats["model_stats"][0]["inference_stats"]["success"]["count"]) == 4


# A model with one explicit group, as tritonserver 2.51 showed it (its configuration's `instance_group`, and the
# names its instances got): the group is named as in a list of several (`<model>_0` unless named), and its instances
# `<group>_<c>`.
SINGLE_GROUPS = {
    "one": ("instance_group [ { count: 1, kind: KIND_CPU } ]", [("groups_0", "KIND_CPU", 1, [])], {"groups_0_0"}),
    "two": ("instance_group [ { count: 2, kind: KIND_CPU } ]", [("groups_0", "KIND_CPU", 2, [])],
            {"groups_0_0", "groups_0_1"}),
    "named": ('instance_group [ { count: 1, kind: KIND_CPU, name: "mine" } ]', [("mine", "KIND_CPU", 1, [])],
              {"mine_0"}),
}


@pytest.mark.parametrize("case", list(SINGLE_GROUPS))
def test_a_single_group_is_named_as_triton_names_it(tmp_path, case):
    groups_text, groups_shown, names = SINGLE_GROUPS[case]
    repo = repository(tmp_path, groups_text)
    env = {"SEEN_DIR": str(tmp_path / "seen"), "CUDA_VISIBLE_DEVICES": ""}
    with serve("--model-repository", str(repo), env=env) as server:
        client = client_for(server, "http")
        groups = client.get_model_config("groups")["instance_group"]
        assert [(g["name"], g["kind"], int(g["count"]), g["gpus"]) for g in groups] == groups_shown
        assert {s[0] for s in seen(tmp_path)} == names
        assert names_answered(server, "http", 2 * len(names)) <= names
        with urllib.request.urlopen(server.metrics_url) as answer:  # the instance label of the server's own metrics
            up = [line for line in answer.read().decode().splitlines() if line.startswith("pytriton_model_instance_up")]
        assert {re.search(r'instance="([^"]*)"', line)[1] for line in up} == names


def test_a_single_gpu_group_on_two_gpus_is_one_group_named_as_in_triton(tmp_path):
    """Triton core names a KIND_GPU group's instances <group>_<c> on each of its GPUs, and shows the group as one
    group listing its GPUs, whether or not other groups are beside it."""
    repo = repository(tmp_path, "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 1, 0 ] } ]")
    gpus = fake_gpus(2)
    env = {**fake_nvml_env(gpus), "SEEN_DIR": str(tmp_path / "seen")}
    with serve("--model-repository", str(repo), env=env) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        groups = client.get_model_config("groups", as_json=True)["config"]["instance_group"]
        assert shown(groups) == [("groups_0", "KIND_GPU", 1, [1, 0])]
        assert {s[:3] for s in seen(tmp_path)} == {("groups_0_0", "GPU", "1"), ("groups_0_0", "GPU", "0")}


def test_a_gpu_group_beside_a_cpu_group_pins_each_gpu_instance(tmp_path):
    """Triton's normalisation: a KIND_GPU group lists its GPUs, each GPU gets `count` instances named
    <group>_<c> (the same names on each GPU), pinned to that GPU (CUDA_VISIBLE_DEVICES); the CPU group's instances
    are CPU instances, device id "0"."""
    repo = repository(tmp_path, 'instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 1, 0 ] }, '
                                '{ count: 2, kind: KIND_CPU, name: "cpu" } ]')
    gpus = fake_gpus(2)
    env = {**fake_nvml_env(gpus), "SEEN_DIR": str(tmp_path / "seen")}
    with serve("--model-repository", str(repo), env=env) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        groups = client.get_model_config("groups", as_json=True)["config"]["instance_group"]
        assert shown(groups) == [("groups_0", "KIND_GPU", 1, [1, 0]), ("cpu", "KIND_CPU", 2, [])]
        assert len(server.worker_pids()) == 4
        assert {s[:3] for s in seen(tmp_path)} == {("groups_0_0", "GPU", "1"), ("groups_0_0", "GPU", "0"),
                                                   ("cpu_0", "CPU", "0"), ("cpu_1", "CPU", "0")}
        assert {(s[2], s[3]) for s in seen(tmp_path) if s[1] == "GPU"} == {("1", gpus[1]["uuid"]),
                                                                          ("0", gpus[0]["uuid"])}
        assert names_answered(server, "grpc", 4) <= {"groups_0_0", "cpu_0", "cpu_1"}


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_shows_the_same_cpu_groups(tmp_path):
    """The facts above, seen again on the real tritonserver 2.51 with the same repository."""
    repo = repository(tmp_path, CPU_GROUPS)
    with real_tritonserver(repo, tmp_path, env={"SEEN_DIR": str(tmp_path / "seen")}) as url:
        groups = grpcclient.InferenceServerClient(url).get_model_config("groups", as_json=True)["config"][
            "instance_group"]
    assert [(g["name"], g["kind"], int(g["count"]), g.get("gpus", [])) for g in groups] == TRITON_2_51_CPU_GROUPS
    assert {s[:3] for s in seen(tmp_path)} == TRITON_2_51_CPU_INSTANCES


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
@pytest.mark.parametrize("case", list(SINGLE_GROUPS))
def test_the_real_tritonserver_names_a_single_group_the_same(tmp_path, case):
    groups_text, groups_shown, names = SINGLE_GROUPS[case]
    repo = repository(tmp_path, groups_text)
    with real_tritonserver(repo, tmp_path, env={"SEEN_DIR": str(tmp_path / "seen")}) as url:
        groups = grpcclient.InferenceServerClient(url).get_model_config("groups", as_json=True)["config"][
            "instance_group"]
    assert [(g["name"], g["kind"], int(g["count"]), g.get("gpus", [])) for g in groups] == groups_shown
    assert {s[0] for s in seen(tmp_path)} == names
