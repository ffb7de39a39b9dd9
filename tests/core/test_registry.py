"""ModelRegistry: several versions of one model, the one a request without a version gets, and Triton's NOT_FOUND
wording for an unknown model or version."""

from __future__ import annotations

import types

import pytest

from pytriton.core.registry import Model, ModelRegistry
from pytriton.exceptions import ServerError, Status


def model(name: str, version: int, loaded: bool = True) -> Model:
    config = types.SimpleNamespace(model_name=name, model_version=version)
    return Model(config=config, scheduler=types.SimpleNamespace(ready=True), source=None,  # type: ignore[arg-type]
                 loaded=loaded)


def test_versions_of_one_model_are_served_side_by_side():
    registry = ModelRegistry()
    v1, v3, other = model("m", 1), model("m", 3), model("a", 1)
    for m in (v3, other, v1):
        registry.add(m)
    assert [(m.name, m.version) for m in registry] == [("a", 1), ("m", 1), ("m", 3)]
    assert len(registry) == 3
    assert registry.versions("m") == [v1, v3]
    assert registry.get("m") is v3 and registry.get("m", "1") is v1 and registry.get("m", -1) is v3
    assert registry.find("m", 1) is v1 and registry.find("m", 2) is None
    with pytest.raises(ValueError, match="model 'm' version 3 is already registered"):
        registry.add(model("m", 3))


def test_a_request_without_version_gets_the_latest_started_version():
    registry = ModelRegistry()
    v1, v2 = model("m", 1), model("m", 2, loaded=False)
    registry.add(v1)
    registry.add(v2)
    assert registry.get("m") is v1  # version 2 is still starting
    v2.loaded = True
    assert registry.get("m") is v2


def test_unknown_model_and_version_are_not_found():
    registry = ModelRegistry()
    registry.add(model("m", 1))
    with pytest.raises(ServerError, match="Request for unknown model: 'x' is not found") as info:
        registry.get("x")
    assert info.value.status is Status.NOT_FOUND
    with pytest.raises(ServerError, match="Request for unknown model: 'm' version 2 is not found"):
        registry.get("m", "2")


def test_remove_one_version_or_all_and_replace():
    registry = ModelRegistry()
    v1, v2 = model("m", 1), model("m", 2)
    registry.add(v1)
    registry.add(v2)
    assert registry.remove("m", model("m", 1)) is None  # not the one registered
    assert registry.remove("m", v1) is v1 and registry.versions("m") == [v2]
    new2 = model("m", 2)
    assert registry.replace(new2) is v2 and registry.get("m", "2") is new2
    registry.add(v1)
    assert registry.remove_all("m") == [v1, new2]
    assert registry.find("m") is None and len(registry) == 0
