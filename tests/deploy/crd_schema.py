"""Custom resources checked against their CustomResourceDefinition's openAPIV3Schema, as the API server would: the
schema validates the object (jsonschema), and a field the schema does not know is reported (the API server would
silently drop it: a typo in a manifest would go unnoticed).

The schemas of KServe's kinds are vendored in tests/deploy/kserve_crd_schemas.yaml, trimmed to what the manifests of
deploy/k8s/kserve use. To regenerate them (after a manifest there uses a new field, or for another KServe release):

    python -m tests.deploy.crd_schema KSERVE_CHECKOUT v0.20.0 > tests/deploy/kserve_crd_schemas.yaml

where KSERVE_CHECKOUT is a clone of https://github.com/kserve/kserve at that tag.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
FIXTURE = HERE / "kserve_crd_schemas.yaml"
CRD_FILES = {
    "InferenceService": "config/crd/full/serving.kserve.io_inferenceservices.yaml",
    "ServingRuntime": "config/crd/full/serving.kserve.io_servingruntimes.yaml",
}
# What the API server checks on every object; the CRD schemas leave metadata to it.
_OPEN_KEYS = ("x-kubernetes-preserve-unknown-fields", "additionalProperties")


def load_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> openAPIV3Schema, from the vendored fixture."""
    data = yaml.safe_load(FIXTURE.read_text())
    return {(entry["apiVersion"], entry["kind"]): entry["openAPIV3Schema"] for entry in data["schemas"]}


def unknown_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The paths of the fields in `value` that `schema` does not declare (metadata is left to the API server)."""
    found: list[str] = []
    if isinstance(value, dict) and "properties" in schema:
        open_object = any(schema.get(key) for key in _OPEN_KEYS)
        for key, item in value.items():
            if path == "" and key == "metadata":
                continue
            if key in schema["properties"]:
                found += unknown_fields(item, schema["properties"][key], f"{path}.{key}")
            elif not open_object:
                found.append(f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            found += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return found


def _strip(node: Any) -> Any:
    """The schema without its descriptions (most of its size)."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _shallow(schema: dict[str, Any]) -> dict[str, Any]:
    """A property no manifest uses: its type (and int-or-string, open-object markers) kept, its insides dropped."""
    keep = ("type", "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields", "format")
    return {k: schema[k] for k in keep if k in schema}


def trim(schema: dict[str, Any], used: list[Any]) -> dict[str, Any]:
    """`schema` with the full definition of every property some value in `used` sets (recursively), and only the
    name and type of the others: every field the manifests set is validated in full, and every field name at those
    levels is still known (for unknown_fields)."""
    out = {k: v for k, v in schema.items() if k not in ("properties", "items")}
    if "properties" in schema:
        objects = [u for u in used if isinstance(u, dict)]
        out["properties"] = {}
        for key, sub in schema["properties"].items():
            values = [o[key] for o in objects if key in o]
            out["properties"][key] = trim(sub, values) if values else _shallow(sub)
    if isinstance(schema.get("items"), dict):
        elements = [e for u in used if isinstance(u, list) for e in u]
        out["items"] = trim(schema["items"], elements) if elements else _shallow(schema["items"])
    return out


def generate(kserve: Path, tag: str, manifests: list[dict[str, Any]]) -> str:
    """The fixture's text: the trimmed schemas of the kinds in `manifests`, from the CRDs of a KServe checkout."""
    entries = []
    for kind, crd_file in CRD_FILES.items():
        crd = yaml.safe_load((kserve / crd_file).read_text())
        for version in crd["spec"]["versions"]:
            api_version = f"{crd['spec']['group']}/{version['name']}"
            used = [m for m in manifests if m["kind"] == kind and m["apiVersion"] == api_version]
            if used:
                schema = _strip(version["schema"]["openAPIV3Schema"])
                entries.append({"apiVersion": api_version, "kind": kind, "source": crd_file,
                                "openAPIV3Schema": trim(schema, used)})
    header = (
        f"# The openAPIV3Schema of KServe's InferenceService and ServingRuntime CustomResourceDefinitions, from\n"
        f"# https://github.com/kserve/kserve (tag {tag}, files named in `source`), Copyright The KServe Authors,\n"
        f"# licensed under the Apache License, Version 2.0 (https://www.apache.org/licenses/LICENSE-2.0).\n"
        f"# Modified: descriptions removed, and the properties that deploy/k8s/kserve does not set reduced to their\n"
        f"# type. Generated by tests/deploy/crd_schema.py (see there); test data only, not shipped.\n"
    )
    return header + yaml.safe_dump({"schemas": entries}, sort_keys=False, width=120)


def _main() -> None:
    kserve, tag = Path(sys.argv[1]), sys.argv[2]
    root = HERE.parent.parent
    paths = [p for p in sorted((root / "deploy/k8s/kserve").glob("*.yaml")) if p.name != "kustomization.yaml"]
    manifests = [doc for path in paths for doc in yaml.safe_load_all(path.read_text()) if doc]
    sys.stdout.write(generate(kserve, tag, manifests))


if __name__ == "__main__":
    _main()
