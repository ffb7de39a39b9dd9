"""Reading a model repository: config.pbtxt into the served configuration, version policies, and the refusals of
configs that cannot be served (each naming the file and the field)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytriton.repository import ModelRepositoryError, load_model, load_repositories
from pytriton.repository.config import UNSUPPORTED_FIELDS

REPOS = Path(__file__).resolve().parents[1] / "repositories"

TENSORS = """
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""


def make_model(root: Path, name: str, config: str | None, versions: tuple[str, ...] = ("1",)) -> Path:
    model_dir = root / name
    model_dir.mkdir(parents=True)
    if config is not None:
        (model_dir / "config.pbtxt").write_text(config)
    for version in versions:
        (model_dir / version).mkdir()
        (model_dir / version / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    return model_dir


def refused(tmp_path: Path, config: str, versions: tuple[str, ...] = ("1",)) -> str:
    model_dir = make_model(tmp_path, "m", config, versions)
    with pytest.raises(ModelRepositoryError) as info:
        load_model(str(model_dir))
    message = str(info.value)
    return message


def test_the_test_repository_converts_as_written():
    add_sub = load_model(str(REPOS / "models" / "add_sub"))
    config = add_sub.config
    assert add_sub.target.startswith("python-backend:") and add_sub.target.endswith("add_sub/1/model.py")
    assert (config.model_name, config.model_version, config.max_batch_size) == ("add_sub", 1, 8)
    assert [(t.name, t.datatype, t.shape) for t in config.inputs] == [("INPUT0", "FP32", (4,)),
                                                                      ("INPUT1", "FP32", (4,))]
    assert config.batcher is not None and config.batcher.preferred_batch_size == [4]
    assert config.batcher.max_queue_delay_microseconds == 20000
    assert config.backend_parameters == {"scale": "1"}
    assert config.gpus == [] and config.instance_count == 1
    classifier = load_model(str(REPOS / "models" / "classifier")).config
    assert classifier.labels == {"SCORES": ["cat", "dog", "bird", "fish"]}
    assert load_model(str(REPOS / "models" / "repeat_int")).config.decoupled
    assert load_model(str(REPOS / "models" / "text_upper")).config.inputs[0].datatype == "BYTES"


def test_version_policies(tmp_path):
    assert load_model(str(REPOS / "models" / "versioned")).config.model_version == 2  # default: latest 1
    pinned = load_model(str(REPOS / "pinned" / "versioned"))
    assert pinned.config.model_version == 1 and pinned.target.endswith("versioned/1/model.py")
    model_dir = make_model(tmp_path, "m", 'backend: "python"\nversion_policy: { latest { num_versions: 1 } }' + TENSORS,
                           ("3", "10", "notaversion"))
    assert load_model(str(model_dir)).config.model_version == 10


def test_missing_name_takes_the_folder_name(tmp_path):
    model_dir = make_model(tmp_path, "m", 'backend: "python"' + TENSORS)
    assert load_model(str(model_dir)).config.model_name == "m"


@pytest.mark.parametrize("config, field, problem", [
    ('name: "other" backend: "python"' + TENSORS, "name", "must match its directory: 'other' is in directory 'm'"),
    (TENSORS, "backend", 'only Python-backend models are supported (backend: "python"), got none'),
    ('backend: "onnxruntime"' + TENSORS, "backend", "got 'onnxruntime'"),
    ('platform: "ensemble"' + TENSORS, "ensemble_scheduling.step", "must specify 'step' for ensemble 'm'"),
    ('backend: "python" max_batch_size: -1' + TENSORS, "max_batch_size", "must be >= 0, got -1"),
    ('backend: "python" input [ { name: "X" dims: [ 2 ] } ] output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]',
     "input[0].data_type", "tensor 'X' needs a data type (e.g. TYPE_FP32), got TYPE_INVALID"),
    ('backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 0 ] } ] '
     'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]', "input[0].dims", "must be >= 1 or -1"),
    ('backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]', "output",
     "declares no output"),
    ('backend: "python" dynamic_batching { }' + TENSORS, "dynamic_batching", "needs max_batch_size > 0"),
    ('backend: "python" max_batch_size: 2 dynamic_batching { } model_transaction_policy { decoupled: true }' + TENSORS,
     "dynamic_batching", "dynamic batching of decoupled models is not supported yet"),
    ('backend: "python" instance_group [ { kind: KIND_CPU }, { kind: KIND_CPU } ]' + TENSORS, "instance_group",
     "2 instance groups: only one is supported yet"),
    ('backend: "python" instance_group [ { kind: KIND_MODEL } ]' + TENSORS, "instance_group[0].kind",
     "KIND_MODEL is not supported"),
    ('backend: "python" sequence_batching { }' + TENSORS, "sequence_batching", "is not supported yet"),
    ('backend: "python" output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] label_filename: "nope.txt" } ]',
     "output[0].label_filename", "cannot read label file"),
    ('backend: "python" version_policy: { specific: { versions: [ 4 ] } }' + TENSORS, "version_policy",
     "version 4 is listed but has no folder (versions found: [1])"),
])
def test_invalid_configs_name_file_and_field(tmp_path, config, field, problem):
    message = refused(tmp_path, config)
    assert message.startswith(f"{tmp_path / 'm' / 'config.pbtxt'}: field '{field}' of model ")
    assert problem in message


def test_unsupported_fields_are_listed():
    assert "sequence_batching" in UNSUPPORTED_FIELDS and "ensemble_scheduling" not in UNSUPPORTED_FIELDS


def test_several_versions_selected_are_refused_for_now(tmp_path):
    message = refused(tmp_path, 'backend: "python" version_policy: { all { } }' + TENSORS, ("1", "2"))
    assert "field 'version_policy' of model 'm': it selects versions [1, 2]" in message
    assert "serving more than one version of a model is not supported yet" in message


def test_a_syntax_error_names_the_file_and_position(tmp_path):
    message = refused(tmp_path, 'backend: "python"\nmax_batch_size: eight')
    assert message.startswith(f"{tmp_path / 'm' / 'config.pbtxt'}: invalid model configuration: 2:")


def test_preferred_batch_size_above_max_is_refused_with_the_file(tmp_path):
    message = refused(tmp_path, 'backend: "python" max_batch_size: 2 dynamic_batching { preferred_batch_size: [ 4 ] }'
                      + TENSORS)
    assert message.startswith(str(tmp_path / "m" / "config.pbtxt"))
    assert "dynamic batching preferred size must be <= max batch size for m" in message


def test_missing_config_asks_for_one(tmp_path):
    model_dir = make_model(tmp_path, "m", None)
    with pytest.raises(ModelRepositoryError, match=r"model 'm' in .*: config.pbtxt is required \(auto-complete is not "
                                                   r"supported yet\)"):
        load_model(str(model_dir))


def test_missing_version_folder_and_model_file(tmp_path):
    with pytest.raises(ModelRepositoryError, match="no version folder"):
        load_model(str(make_model(tmp_path / "a", "m", 'backend: "python"' + TENSORS, ())))
    model_dir = make_model(tmp_path / "b", "m", 'backend: "python" default_model_filename: "other.py"' + TENSORS)
    with pytest.raises(ModelRepositoryError, match="model 'm' version 1: no model file '.*/m/1/other.py'"):
        load_model(str(model_dir))


def test_repositories_several_folders_and_duplicates(tmp_path):
    make_model(tmp_path / "r1", "a", 'backend: "python"' + TENSORS)
    make_model(tmp_path / "r2", "b", 'backend: "python"' + TENSORS)
    (tmp_path / "r1" / "not_a_model.txt").write_text("")
    models = load_repositories([str(tmp_path / "r1"), str(tmp_path / "r2")])
    assert [m.config.model_name for m in models] == ["a", "b"]
    make_model(tmp_path / "r3", "a", 'backend: "python"' + TENSORS)
    with pytest.raises(ModelRepositoryError, match="model 'a' appears in two model repositories"):
        load_repositories([str(tmp_path / "r1"), str(tmp_path / "r3")])
    with pytest.raises(ModelRepositoryError, match="model repository '.*nowhere' is not a directory"):
        load_repositories([str(tmp_path / "nowhere")])
