"""The files a model's configuration names (`default_model_filename`, `label_filename`, an initial state's
`data_file`) stay inside the model's folder: no absolute path, no '..', no symbolic link out of it; whether the
configuration is the model's config.pbtxt (every control mode) or a load request's override."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as pb

from pytriton.repository import ModelRepositoryError, load_versions

TENSORS = """
backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] LABEL } ]
"""
MARKER_MODEL = """
open({marker!r}, "w").close()


class TritonPythonModel:
    def execute(self, requests):
        return []
"""


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(a repository holding model 'm', a folder outside it with a secret and a model file that marks its import)."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    outside.mkdir()
    (outside / "secret.txt").write_text("root:x:0:0\n")
    (outside / "evil.py").write_text(MARKER_MODEL.format(marker=str(outside / "imported")))
    return repo, outside


def config(text: str, label: str = "") -> str:
    return TENSORS.replace("LABEL", f'label_filename: "{label}"' if label else "") + text


def override(text: str) -> pb.ModelConfig:
    """A load request's configuration (the controller parses its JSON into the same message)."""
    return text_format.Parse(text, pb.ModelConfig())


@pytest.mark.parametrize("where", ["config.pbtxt", "override"])
@pytest.mark.parametrize("kind", ["absolute", "dots"])
def test_default_model_filename_outside_the_model_folder_is_refused_and_never_run(layout, where, kind):
    repo, outside = layout
    evil = outside / "evil.py"
    name = str(evil) if kind == "absolute" else os.path.relpath(evil, repo / "m" / "1")
    text = config(f'default_model_filename: "{name}"\n')
    if where == "config.pbtxt":
        (repo / "m" / "config.pbtxt").write_text(text)
    with pytest.raises(ModelRepositoryError) as info:  # (auto-complete on: it would import the file in a child)
        load_versions(str(repo / "m"), override(text) if where == "override" else None)
    message = str(info.value)
    assert "default_model_filename" in message and f"'{name}'" in message and "model 'm'" in message
    assert "outside" in message
    assert not (outside / "imported").exists()


@pytest.mark.parametrize("where", ["config.pbtxt", "override"])
@pytest.mark.parametrize("kind", ["absolute", "dots"])
def test_label_filename_outside_the_model_folder_is_refused(layout, where, kind):
    repo, outside = layout
    secret = outside / "secret.txt"
    name = str(secret) if kind == "absolute" else os.path.relpath(secret, repo / "m")
    text = config("", label=name)
    if where == "config.pbtxt":
        (repo / "m" / "config.pbtxt").write_text(text)
    with pytest.raises(ModelRepositoryError) as info:
        load_versions(str(repo / "m"), override(text) if where == "override" else None, auto_complete=False)
    message = str(info.value)
    assert "output[0].label_filename" in message and f"'{name}'" in message and "output 'Y'" in message
    assert "model 'm'" in message and "outside model directory" in message


def test_a_symlink_out_of_the_model_folder_and_its_repository_is_refused(layout):
    repo, outside = layout
    os.symlink(outside, repo / "m" / "data")
    os.symlink(outside / "evil.py", repo / "m" / "1" / "linked.py")
    for text in (config("", label="data/secret.txt"), config('default_model_filename: "linked.py"\n')):
        with pytest.raises(ModelRepositoryError, match="outside model directory"):
            load_versions(str(repo / "m"), override(text))
    assert not (outside / "imported").exists()


def test_symlinks_inside_the_repository_and_a_linked_model_folder_are_served(tmp_path, layout):
    """A model file linked to another model's of the same repository (as tests/repositories does), and a model folder
    that is itself a link to elsewhere, are the administrator's layout: served."""
    repo, _ = layout
    (repo / "other" / "1").mkdir(parents=True)
    (repo / "other" / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (repo / "m" / "1" / "model.py").unlink()
    os.symlink("../../other/1/model.py", repo / "m" / "1" / "model.py")
    (repo / "m" / "labels.txt").write_text("a\nb\n")
    (repo / "m" / "config.pbtxt").write_text(config("", label="labels.txt"))
    assert load_versions(str(repo / "m"), auto_complete=False)[0].config.labels == {"Y": ["a", "b"]}
    store = tmp_path / "store"
    os.rename(repo / "other", store)
    os.symlink(store, repo / "linked")
    (store / "config.pbtxt").write_text(config("").replace("backend", 'name: "linked"\nbackend'))
    assert load_versions(str(repo / "linked"), auto_complete=False)[0].target.endswith("/linked/1/model.py")


def test_an_initial_state_file_through_a_symlink_out_of_the_model_folder_is_refused(layout):
    repo, outside = layout
    (repo / "m" / "initial_state").mkdir()
    os.symlink(outside / "secret.txt", repo / "m" / "initial_state" / "state")
    text = (
        'backend: "python"\nmax_batch_size: 1\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'sequence_batching { state [ { input_name: "IN_STATE" output_name: "OUT_STATE" data_type: TYPE_INT8 '
        'dims: [ 11 ] initial_state [ { name: "init" data_type: TYPE_INT8 dims: [ 11 ] data_file: "state" } ] } ] }\n'
    )
    with pytest.raises(ModelRepositoryError, match="data_file"):
        load_versions(str(repo / "m"), override(text), auto_complete=False)
