"""ModelControl without a server: the repository index of models never loaded and of a name found in two
repositories, the folder signature that poll mode compares, mode checks, and (with a fake core) which versions of a
multi-version model a poll or a load starts and stops, and a failing new version leaving the old one serving."""

from __future__ import annotations

import asyncio
import os
import shutil
import types
from pathlib import Path

import pytest

from pytriton.core.registry import Model, ModelRegistry
from pytriton.exceptions import ServerError
from pytriton.repository.control import DUPLICATE_REASON, ModelControl, folder_signature

MODELS = Path(__file__).resolve().parents[1] / "repositories" / "models"
VERSIONS = Path(__file__).resolve().parents[1] / "repositories" / "versions"


def control(folders: list[Path], mode: str = "explicit") -> ModelControl:
    core = types.SimpleNamespace(registry=ModelRegistry())
    return ModelControl(core, None, [str(f) for f in folders], mode)  # type: ignore[arg-type]


def test_index_lists_models_never_loaded_by_name_only(tmp_path):
    shutil.copytree(MODELS / "add_sub", tmp_path / "add_sub", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / ".hidden").mkdir()
    assert control([tmp_path]).index(ready_only=False) == [{"name": "add_sub"}]
    assert control([tmp_path]).index(ready_only=True) == []


def test_index_shows_a_model_in_two_repositories_unavailable(tmp_path):
    for repo in ("a", "b"):
        shutil.copytree(MODELS / "add_sub", tmp_path / repo / "add_sub")
    assert control([tmp_path / "a", tmp_path / "b"]).index(ready_only=False) == [
        {"name": "add_sub", "version": "-1", "state": "UNAVAILABLE", "reason": DUPLICATE_REASON}]
    assert control([tmp_path / "a", tmp_path / "b"]).index(ready_only=True) == []


def test_folder_signature_changes_with_a_file_and_a_version(tmp_path):
    shutil.copytree(MODELS / "add_sub", tmp_path / "add_sub", ignore=shutil.ignore_patterns("__pycache__"))
    model = tmp_path / "add_sub"
    before = folder_signature(str(model))
    (model / "1" / "__pycache__").mkdir()
    (model / "1" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"x")
    assert folder_signature(str(model)) == before  # byte code written by an import is no change
    (model / "1" / "model.py").write_text((model / "1" / "model.py").read_text() + "\n# edited\n")
    edited = folder_signature(str(model))
    assert edited != before
    (model / "2").mkdir()
    (model / "2" / "model.py").write_text("")
    assert folder_signature(str(model)) != edited


def test_load_and_unload_refused_in_poll_mode(tmp_path):
    mode = "poll"
    with pytest.raises(ServerError, match="explicit model load / unload is not allowed if polling is enabled"):
        asyncio.run(control([tmp_path], mode).load("m", {}))
    with pytest.raises(ServerError, match="explicit model load / unload is not allowed if polling is enabled"):
        asyncio.run(control([tmp_path], mode).unload("m", False))


def test_no_controller_for_mode_none(tmp_path):
    with pytest.raises(ValueError, match="none"):
        control([tmp_path], "none")


class FakeCore:
    """The core's model operations, recording which versions start and stop; a version folder holding a file FAIL
    fails to start."""

    def __init__(self) -> None:
        self.registry = ModelRegistry()
        self.started: list[int] = []
        self.stopped: list[int] = []

    async def replace_model(self, config, source, timeout_s):
        if os.path.exists(os.path.join(os.path.dirname(source.split(":", 1)[1]), "FAIL")):
            raise RuntimeError(f"version {config.model_version} failed to start")
        self.started.append(config.model_version)
        scheduler = types.SimpleNamespace(ready=True)
        self.registry.replace(Model(config=config, scheduler=scheduler, source=source, loaded=True))  # type: ignore

    async def unload_model(self, name, timeout_s=10.0, graceful=False, version=None):
        for model in self.registry.versions(name):
            if version is None or model.version == version:
                self.registry.remove(name, model)
                self.stopped.append(model.version)


def multi_control(tmp_path: Path, policy: str, versions: tuple[int, ...], mode: str) -> tuple[ModelControl, FakeCore]:
    model = tmp_path / "multi"
    model.mkdir()
    (model / "config.pbtxt").write_text((VERSIONS / "multi" / "config.pbtxt").read_text().replace("all { }", policy))
    for version in versions:
        shutil.copytree(VERSIONS / "multi" / str(version), model / str(version),
                        ignore=shutil.ignore_patterns("__pycache__"))
    core = FakeCore()
    host = types.SimpleNamespace(worker_pool=lambda config, target: target)
    return ModelControl(core, host, [str(tmp_path)], mode), core  # type: ignore[arg-type]


def states(control: ModelControl) -> dict[str, str]:
    return {e["version"]: e["state"] for e in control.index(ready_only=False)}


def test_poll_reloads_only_the_versions_whose_files_changed(tmp_path):
    control, core = multi_control(tmp_path, "all { }", (1, 2), "poll")
    model = tmp_path / "multi"

    async def scenario() -> None:
        await control._poll_once()
        assert (sorted(core.started), states(control)) == ([1, 2], {"1": "READY", "2": "READY"})
        shutil.copytree(VERSIONS / "multi" / "3", model / "3")
        await control._poll_once()
        assert core.started[2:] == [3]  # 1 and 2 serve on untouched
        (model / "1" / "model.py").write_text((model / "1" / "model.py").read_text() + "\n# edited\n")
        await control._poll_once()
        assert core.started[3:] == [1]
        (model / "config.pbtxt").write_text((model / "config.pbtxt").read_text() + "\n# edited\n")
        await control._poll_once()
        assert sorted(core.started[4:]) == [1, 2, 3]  # the model's config: every version
        shutil.rmtree(model / "2")
        await control._poll_once()
        assert core.stopped == [2] and [m.version for m in core.registry.versions("multi")] == [1, 3]
        assert states(control) == {"1": "READY", "2": "UNAVAILABLE", "3": "READY"}

    asyncio.run(scenario())


def test_a_new_version_that_fails_leaves_the_old_one_serving(tmp_path):
    control, core = multi_control(tmp_path, "latest { num_versions: 1 }", (1, 2), "explicit")
    (tmp_path / "multi" / "2" / "FAIL").write_text("")

    async def scenario() -> None:
        with pytest.raises(ServerError, match="load failed for model 'multi': version 2 is at UNAVAILABLE state: "
                                              "version 2 failed to start;"):
            await control.load("multi", {})
        assert states(control) == {"2": "UNAVAILABLE"}
        (tmp_path / "multi" / "2" / "FAIL").unlink()
        await control.load("multi", {})
        assert states(control) == {"2": "READY"}
        shutil.copytree(VERSIONS / "multi" / "3", tmp_path / "multi" / "3")
        (tmp_path / "multi" / "3" / "FAIL").write_text("")
        with pytest.raises(ServerError, match="version 3 is at UNAVAILABLE state"):
            await control.load("multi", {})
        assert states(control) == {"2": "READY", "3": "UNAVAILABLE"}  # version 2 serves on
        assert core.registry.get("multi").version == 2 and core.stopped == []
        (tmp_path / "multi" / "3" / "FAIL").unlink()
        await control.load("multi", {})
        assert states(control) == {"2": "UNAVAILABLE", "3": "READY"} and core.stopped == [2]
        await control.unload("multi", False)
        assert [e.get("reason") for e in control.index(ready_only=False)] == ["unloaded", "unloaded"]

    asyncio.run(scenario())
