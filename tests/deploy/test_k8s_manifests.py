"""deploy/k8s without a cluster: every kustomization renders, every object satisfies the Kubernetes schemas (strict:
unknown fields are errors) or, for KServe's kinds, KServe's CRD schemas; yamllint finds nothing; and the pieces agree
with each other and with the Dockerfile (command, user, ports, probes, grace period, autoscaler metric)."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from tests._support.paths import REPO
from tests.deploy.crd_schema import load_schemas, unknown_fields
from tests.deploy.dockerfile import exec_form, instructions, last
from tests.deploy.k8s import (
    K8S,
    K8S_VERSIONS,
    KUSTOMIZATIONS,
    adapter_rules,
    base_object,
    container,
    kserve_object,
    manifest_files,
    objects_of,
    option,
    render,
    series_names,
)

DOCKERFILE = REPO / "Dockerfile"
KSERVE_GROUP = "serving.kserve.io/"


def _check_object(obj: dict[str, Any]) -> None:
    """Kubernetes' own kinds against its schemas; KServe's against the vendored CRD schemas (fields included)."""
    if obj["apiVersion"].startswith(KSERVE_GROUP):
        schema = load_schemas()[(obj["apiVersion"], obj["kind"])]
        jsonschema.validate(obj, schema)
        assert unknown_fields(obj, schema) == [], f"{obj['kind']}: fields KServe does not know"
        return
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_kustomization_renders_valid_objects(kustomization):
    objects = render(kustomization)
    assert objects
    for obj in objects:
        _check_object(obj)


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(K8S)))
def test_every_object_file_is_valid_without_kustomize(path):
    """The files hold complete objects (or kustomize patches of them, which are not checked alone)."""
    patch = path.parent.name in ("cpu", "gpu") and path.name != "kustomization.yaml"
    for obj in objects_of(path):
        if not patch:
            _check_object(obj)


def test_the_checks_can_fail():
    """A misspelt field or a wrong type is caught, in a built-in kind and in a KServe kind."""
    deployment = copy.deepcopy(base_object("Deployment"))
    probe = deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    probe["periodSecond"] = probe.pop("periodSeconds")
    with pytest.raises(kubernetes_validate.ValidationError):
        _check_object(deployment)
    runtime = copy.deepcopy(kserve_object("ServingRuntime"))
    runtime["spec"]["containers"][0]["args"] = "--model-repository=/mnt/models"
    with pytest.raises(jsonschema.ValidationError):
        _check_object(runtime)
    service = copy.deepcopy(kserve_object("InferenceService"))
    service["spec"]["predictor"]["model"]["storageURI"] = service["spec"]["predictor"]["model"].pop("storageUri")
    with pytest.raises(AssertionError, match="fields KServe does not know"):
        _check_object(service)


def test_yamllint_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "yamllint", "-f", "parsable", "-c", str(REPO / ".yamllint"),
                             str(K8S)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _image() -> tuple[list[str], int]:
    items = instructions(DOCKERFILE)
    return exec_form(last(items, "ENTRYPOINT")), int(last(items, "USER").split(":")[0])


def test_deployment_runs_the_images_entrypoint_on_the_model_repository():
    entrypoint, uid = _image()
    pod = base_object("Deployment")["spec"]["template"]["spec"]
    server = container(pod, "pytriton")
    assert server["command"] == entrypoint
    repository = option(server["args"], "--model-repository")
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    assert mounts[repository] == "model-repository"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["model-repository"]
    (init,) = pod["initContainers"]
    assert {m["mountPath"]: m["name"] for m in init["volumeMounts"]}[repository] == "model-repository"
    # The image's user, not root, and nothing more than it needs.
    assert pod["securityContext"]["runAsUser"] == uid and pod["securityContext"]["runAsNonRoot"] is True
    for each in (server, init):
        assert each["securityContext"]["allowPrivilegeEscalation"] is False
        assert each["securityContext"]["capabilities"]["drop"] == ["ALL"]


def _quantity(text: str) -> float:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "m": 1e-3, "": 1}
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text)).groups()
    return float(number) * units[unit]


@pytest.mark.parametrize("kustomization", ["base", "overlays/cpu", "overlays/gpu"])
def test_shared_memory_probes_and_stop(kustomization):
    """/dev/shm is memory-backed and sized, within the memory limit; the probes ask Triton's health endpoints on the
    HTTP port; the kubelet waits longer than the server's own stop may take. (The base from its files: no kubectl
    needed.)"""
    if kustomization == "base":
        deployment = base_object("Deployment")
    else:
        (deployment,) = [o for o in render(kustomization) if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    server = container(pod, "pytriton")
    volumes = {v["name"]: v for v in pod["volumes"]}
    (shm,) = [m["name"] for m in server["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    assert volumes[shm]["emptyDir"]["medium"] == "Memory"
    shm_bytes = _quantity(volumes[shm]["emptyDir"]["sizeLimit"])
    assert shm_bytes >= 2**30
    assert _quantity(server["resources"]["limits"]["memory"]) >= 2 * shm_bytes
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(server["resources"][kind])
    ports = {p["name"]: p["containerPort"] for p in server["ports"]}
    assert ports == {"http": 8000, "grpc": 8001, "metrics": 8002}
    for probe, path in (("readinessProbe", "/v2/health/ready"), ("livenessProbe", "/v2/health/live"),
                        ("startupProbe", "/v2/health/live")):
        get = server[probe]["httpGet"]
        assert get["path"] == path and ports.get(get["port"], get["port"]) == 8000
    exit_timeout = float(option(server["args"], "--exit-timeout"))
    pause = server["lifecycle"]["preStop"]["exec"]["command"]
    assert pause[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > float(pause[1]) + exit_timeout
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == ports["metrics"]


def test_gpu_overlay_asks_for_a_gpu_and_puts_the_model_on_it():
    objects = render("overlays/gpu")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert container(pod, "pytriton")["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert pod["nodeSelector"] and any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
    (models,) = [o for o in objects if o["kind"] == "ConfigMap"]
    assert "kind: KIND_GPU" in models["data"]["config.pbtxt"]
    (cpu_models,) = [o for o in render("overlays/cpu") if o["kind"] == "ConfigMap"]
    assert "kind: KIND_CPU" in cpu_models["data"]["config.pbtxt"]
    assert models["data"]["model.py"] == cpu_models["data"]["model.py"]


def test_service_pdb_and_autoscaler_select_the_pods():
    objects = {kind: base_object(kind) for kind in ("Deployment", "Service", "PodDisruptionBudget",
                                                    "HorizontalPodAutoscaler")}
    deployment = objects["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert "replicas" not in deployment["spec"], "the HorizontalPodAutoscaler owns the replica count"
    for kind in ("Service", "PodDisruptionBudget"):
        selector = objects[kind]["spec"]["selector"]
        selector = selector.get("matchLabels", selector)
        assert selector.items() <= labels.items(), kind
    ports = {p["name"]: p for p in objects["Service"]["spec"]["ports"]}
    assert {n: p["port"] for n, p in ports.items()} == {"http": 8000, "grpc": 8001, "metrics": 8002}
    assert ports["grpc"]["appProtocol"] == "grpc"
    hpa = objects["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert hpa["spec"]["minReplicas"] >= 2, "one replica and a PodDisruptionBudget leave drains nothing to serve"
    # The autoscaler's metric is the one the adapter rule defines.
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods"
    names = [rule["name"]["as"] for rule in adapter_rules()]
    assert metric["pods"]["metric"]["name"] in names


def test_adapter_rule_maps_series_to_pods():
    (rule,) = adapter_rules()
    assert rule["resources"]["overrides"] == {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
    assert re.fullmatch(rule["name"]["matches"], series_names(rule["seriesQuery"])[0])
    for placeholder in ("<<.LabelMatchers>>", "<<.GroupBy>>"):
        assert placeholder in rule["metricsQuery"]


def test_kserve_runtime_runs_the_images_entrypoint():
    entrypoint, uid = _image()
    runtime = kserve_object("ServingRuntime")
    (server,) = runtime["spec"]["containers"]
    assert server["name"] == "kserve-container" and server["command"] == entrypoint
    assert server["securityContext"]["runAsUser"] == uid
    assert option(server["args"], "--model-repository") == "/mnt/models"  # where KServe's storage initializer puts it
    assert option(server["args"], "--load-model") == "{{.Name}}"
    assert set(runtime["spec"]["protocolVersions"]) == {"v2", "grpc-v2"}
    service = kserve_object("InferenceService")
    model = service["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["modelFormat"]["name"] in [f["name"] for f in runtime["spec"]["supportedModelFormats"]]
    assert model["storageUri"]


def test_fixture_names_its_source_and_licence():
    head = (Path(__file__).parent / "kserve_crd_schemas.yaml").read_text().splitlines()[:5]
    text = "\n".join(head)
    assert "github.com/kserve/kserve" in text and "Apache License, Version 2.0" in text and "tag v0." in text
