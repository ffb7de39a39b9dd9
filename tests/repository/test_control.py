"""ModelControl without a server: the repository index of models never loaded and of a name found in two
repositories, the folder signature that poll mode compares, and mode checks."""

from __future__ import annotations

import asyncio
import shutil
import types
from pathlib import Path

import pytest

from pytriton.core.registry import ModelRegistry
from pytriton.exceptions import ServerError
from pytriton.repository.control import DUPLICATE_REASON, ModelControl, folder_signature

MODELS = Path(__file__).resolve().parents[1] / "repositories" / "models"


def control(folders: list[Path], mode: str = "explicit") -> ModelControl:
    core = types.SimpleNamespace(registry=ModelRegistry())
    return ModelControl(core, None, [str(f) for f in folders], mode)  # type: ignore[arg-type]


def test_index_lists_models_never_loaded_by_name_only(tmp_path):
    shutil.copytree(MODELS / "add_sub", tmp_path / "add_sub")
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
    shutil.copytree(MODELS / "add_sub", tmp_path / "add_sub")
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
