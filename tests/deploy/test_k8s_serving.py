"""deploy/k8s's containers run outside a cluster, as the kubelet would run them: the initContainer's command lays out
the model repository from the ConfigMap's files (in the kubelet's layout of a ConfigMap volume), the server runs the
Deployment's command and args on it, its probe paths answer 200, it serves the example model, its /metrics has the
series the prometheus-adapter rule reads, and SIGTERM stops it cleanly. The same for the KServe ServingRuntime, with
KServe's {{.Name}} put in as KServe does."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import yaml

from tests._fake_nvml import fake_gpus, fake_nvml_env
from tests._support.metrics import samples, scrape
from tests._support.serving import ServerProcess
from tests.deploy.k8s import (
    K8S,
    adapter_rules,
    base_object,
    container,
    kserve_object,
    option,
    render,
    series_names,
)

BIN = Path(sys.executable).parent


def _config_map_data() -> dict[str, str]:
    """The data of the example models' ConfigMap, as the base kustomization's configMapGenerator makes it."""
    kustomization = yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())
    (generator,) = kustomization["configMapGenerator"]
    data = {}
    for entry in generator["files"]:
        key, _, path = entry.partition("=")
        data[key] = (K8S / "base" / path).read_text()
    return data


def _config_map_volume(root: Path, volume: dict[str, Any], data: dict[str, str]) -> None:
    """The files of a ConfigMap volume as the kubelet writes them: in a timestamped directory behind `..data`, with
    a symbolic link for each top-level name."""
    versioned = root / "..2026_01_01_00_00_00.000000000"
    for item in volume["configMap"]["items"]:
        target = versioned / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(data[item["key"]])
    (root / "..data").symlink_to(versioned.name)
    for top in {Path(item["path"]).parts[0] for item in volume["configMap"]["items"]}:
        (root / top).symlink_to(f"..data/{top}")


def _fill_repository(tmp_path: Path, data: dict[str, str] | None = None) -> Path:
    """Runs the Deployment's initContainer command with its mounts moved under tmp_path, on the ConfigMap `data`
    (default: the base's); the repository it fills."""
    pod = base_object("Deployment")["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    command = list(init["command"])
    for mount in init["volumeMounts"]:
        local = tmp_path / mount["name"]
        local.mkdir()
        if "configMap" in volumes[mount["name"]]:
            _config_map_volume(local, volumes[mount["name"]], data or _config_map_data())
        command = [word.replace(mount["mountPath"], str(local)) for word in command]
    assert command[0] == "sh" and shutil.which("sh"), command
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    return tmp_path / "model-repository"


def _program(command: list[str]) -> list[str]:
    assert command[0] == "pytriton"
    return [str(BIN / "pytriton"), *command[1:]]


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _add_sub_http(url: str, model: str) -> None:
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    b = np.full((1, 4), 0.5, dtype=np.float32)
    with httpclient.InferenceServerClient(url) as client:
        inputs = [httpclient.InferInput(name, [1, 4], "FP32") for name in ("INPUT0", "INPUT1")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        result = client.infer(model, inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def _start(repository: Path, env: dict[str, str] | None = None) -> tuple[ServerProcess, dict[str, Any]]:
    """The Deployment's server container, run on `repository`; the process and the container's definition."""
    pod = base_object("Deployment")["spec"]["template"]["spec"]
    server = container(pod, "pytriton")
    mount = option(server["args"], "--model-repository")
    args = [str(repository) if arg == mount else arg for arg in server["args"]]
    return ServerProcess(args, program=_program(server["command"]), env=env), server


def test_deployment_serves_the_repository_the_init_container_fills(tmp_path):
    repository = _fill_repository(tmp_path)
    assert sorted(str(p.relative_to(repository)) for p in repository.rglob("*") if p.is_file()) == [
        "add_sub/1/model.py", "add_sub/config.pbtxt"]
    process, server = _start(repository)
    try:
        http = f"http://{process.http_url}"
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert _get(http + server[probe]["httpGet"]["path"]) == 200, probe
        _add_sub_http(process.http_url, "add_sub")
        text = scrape(process)
    finally:
        # The kubelet's signal; the server stops within --exit-timeout and exits 0.
        code = process.stop(signal.SIGTERM, timeout_s=float(option(server["args"], "--exit-timeout")))
    assert code == 0, process.log
    assert "pytriton server ready" in process.log
    # The series the adapter rule reads exist, for the model that served the request.
    values = samples(text)
    (rule,) = adapter_rules()
    read = set(series_names(rule["seriesQuery"])) | set(series_names(rule["metricsQuery"]))
    assert read == {"nv_inference_queue_duration_us", "nv_inference_request_success"}
    for name in read:
        found = {labels: value for (series, labels), value in values.items() if series == name}
        assert (("model", "add_sub"), ("version", "1")) in found, (name, found)
    assert values[("nv_inference_request_success", (("model", "add_sub"), ("version", "1")))] == 1


def test_kserve_runtime_serves_the_model_named_as_the_inference_service(tmp_path):
    """KServe downloads the storageUri to /mnt/models and puts the InferenceService's name for {{.Name}}."""
    name = kserve_object("InferenceService")["metadata"]["name"]
    repository = tmp_path / "mnt-models"
    model = repository / name
    (model / "1").mkdir(parents=True)
    config = (K8S / "base/models/add_sub/config.pbtxt").read_text()
    (model / "config.pbtxt").write_text(config.replace('name: "add_sub"', f'name: "{name}"'))
    shutil.copy(K8S / "base/models/add_sub/1/model.py", model / "1" / "model.py")
    # Another model of the repository is not loaded: the runtime serves the one it was deployed for.
    shutil.copytree(model, repository / "other")
    (repository / "other" / "config.pbtxt").write_text(config.replace('name: "add_sub"', 'name: "other"'))
    (template,) = kserve_object("ServingRuntime")["spec"]["containers"]
    # KServe executes the container, as JSON, as a Go template over the InferenceService's metadata.
    server = json.loads(json.dumps(template).replace("{{.Name}}", name))
    assert "{{" not in json.dumps(server)
    args = [arg.replace("/mnt/models", str(repository)) for arg in server["args"]]
    process = ServerProcess(args, program=_program(server["command"]))
    try:
        for probe in ("readinessProbe", "livenessProbe"):
            assert server[probe]["httpGet"]["port"] == int(option(server["args"], "--http-port"))
            assert _get(f"http://{process.http_url}{server[probe]['httpGet']['path']}") == 200, probe
        assert server["readinessProbe"]["httpGet"]["path"] == f"/v2/models/{name}/ready"
        assert _get(f"http://{process.http_url}/v2/models/other/ready") != 200
        _add_sub_http(process.http_url, name)
        with grpcclient.InferenceServerClient(process.grpc_url) as client:  # protocolVersions: grpc-v2
            assert client.is_model_ready(name)
    finally:
        code = process.stop(signal.SIGTERM, timeout_s=float(option(server["args"], "--exit-timeout")))
    assert code == 0, process.log


def test_gpu_overlay_puts_the_model_on_the_pods_gpu(tmp_path):
    """The gpu overlay's model repository, on a pod that sees the one GPU the device plugin gave it (NVML faked:
    tests/_fake_nvml): the instance runs on that GPU."""
    (config_map,) = [o for o in render("overlays/gpu") if o["kind"] == "ConfigMap"]
    repository = _fill_repository(tmp_path, config_map["data"])
    process, server = _start(repository, env=fake_nvml_env(fake_gpus(1)))
    try:
        _add_sub_http(process.http_url, "add_sub")
        values = samples(scrape(process))
    finally:
        code = process.stop(signal.SIGTERM, timeout_s=float(option(server["args"], "--exit-timeout")))
    assert code == 0, process.log
    instances = [dict(labels) for (name, labels), value in values.items()
                 if name == "pytriton_model_instance_up" and dict(labels)["model"] == "add_sub" and value == 1]
    assert [(i["kind"], i["gpu"]) for i in instances] == [("KIND_GPU", "0")], instances
