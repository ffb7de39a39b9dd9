"""The manifests of deploy/k8s as the tests read them: rendered by `kubectl kustomize` where kubectl exists, else read
from their files (the base and the KServe resources are plain objects; the overlays need kustomize)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._support.paths import REPO

K8S = REPO / "deploy" / "k8s"
# What `kubectl kustomize` renders; every one is checked.
KUSTOMIZATIONS = ["base", "overlays/cpu", "overlays/gpu", "kserve", "prometheus-adapter"]
# Kubernetes releases whose schemas (shipped with kubernetes-validate) the built-in objects must satisfy: the
# oldest we claim (autoscaling/v2, policy/v1 and appProtocol are older) and a current one.
K8S_VERSIONS = ["1.30", "1.37"]


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl is not installed (it renders the kustomizations)")
    return path


def render(kustomization: str) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize deploy/k8s/<kustomization>` prints (offline: it contacts no cluster)."""
    result = subprocess.run([kubectl(), "kustomize", str(K8S / kustomization)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def manifest_files() -> list[Path]:
    """Every YAML file of deploy/k8s."""
    return sorted(p for p in K8S.rglob("*") if p.suffix in (".yaml", ".yml"))


def objects_of(path: Path) -> list[dict[str, Any]]:
    """The Kubernetes objects a file holds (kustomization files and kustomize patches hold none)."""
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return [doc for doc in docs if doc.get("kind") != "Kustomization"]


def base_object(kind: str, name: str = "pytriton") -> dict[str, Any]:
    """An object of deploy/k8s/base, from its file (no kustomize needed)."""
    for path in sorted((K8S / "base").glob("*.yaml")):
        for doc in objects_of(path):
            if doc["kind"] == kind and doc["metadata"]["name"] == name:
                return doc
    raise AssertionError(f"deploy/k8s/base has no {kind} {name}")


def kserve_object(kind: str) -> dict[str, Any]:
    for path in sorted((K8S / "kserve").glob("*.yaml")):
        for doc in objects_of(path):
            if doc["kind"] == kind:
                return doc
    raise AssertionError(f"deploy/k8s/kserve has no {kind}")


def container(pod_spec: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in pod_spec["containers"] if c["name"] == name]
    return found


def option(args: list[str], name: str) -> str:
    """The value of `--name VALUE` or `--name=VALUE` in args (the last one, as click takes it)."""
    values = []
    for i, arg in enumerate(args):
        if arg == name:
            values.append(args[i + 1])
        elif arg.startswith(name + "="):
            values.append(arg.split("=", 1)[1])
    assert values, f"{name} is not given in {args}"
    return values[-1]


def adapter_rules() -> list[dict[str, Any]]:
    """The rules of the prometheus-adapter configuration (deploy/k8s/prometheus-adapter)."""
    (config_map,) = objects_of(K8S / "prometheus-adapter" / "configmap.yaml")
    return yaml.safe_load(config_map["data"]["config.yaml"])["rules"]


def series_names(query: str) -> list[str]:
    """The metric names a PromQL expression (or a series query) reads: identifiers followed by a label selector."""
    return re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", query)
