"""`pb_utils.ModelConfig` (the object auto_complete_config completes) checked method by method with Triton's error
wording; the JSON form a model is given; a model's auto_complete_config run in its child process."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as pb

from pytriton.backends import pb_utils
from pytriton.repository import ModelRepositoryError, load_model
from pytriton.repository.autocomplete import config_json

ModelConfig = pb_utils.ModelConfig  # re-exported where models find it


def partial(**fields) -> ModelConfig:
    text = 'name: "m" backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ] ' + fields.pop(
        "extra", "")
    return ModelConfig(config_json(text_format.Parse(text, pb.ModelConfig())))


def test_the_json_form_has_every_plain_field_and_numbers():
    config = text_format.Parse('name: "m" input [ { name: "X" data_type: TYPE_FP32 dims: [ -1, 4 ] } ] '
                               "dynamic_batching { max_queue_delay_microseconds: 100 }", pb.ModelConfig())
    data = config_json(config)
    assert data["max_batch_size"] == 0 and data["output"] == []
    assert data["input"][0]["dims"] == [-1, 4] and data["input"][0]["optional"] is False
    assert data["dynamic_batching"]["max_queue_delay_microseconds"] == 100
    assert "sequence_batching" not in data


def test_add_input_completes_an_input_the_configuration_names():
    config = ModelConfig(config_json(text_format.Parse('name: "m" input [ { name: "X" dims: [ 2 ] } ]',
                                                        pb.ModelConfig())))
    config.add_input({"name": "X", "data_type": "TYPE_INT8", "dims": [2]})
    config.add_input({"name": "Z", "data_type": "TYPE_FP32", "dims": [-1], "optional": True})
    assert [(t["name"], t["data_type"], t["dims"]) for t in config.as_dict()["input"]] == [
        ("X", "TYPE_INT8", [2]), ("Z", "TYPE_FP32", [-1])]


@pytest.mark.parametrize("tensor, message", [
    ({"name": "X", "data_type": "TYPE_INT32", "dims": [4]},
     "unable to load model 'm', configuration expects datatype TYPE_FP32 for input 'X', model provides TYPE_INT32"),
    ({"name": "X", "data_type": "TYPE_FP32", "dims": [8]},
     "model 'm', tensor 'X': the model expects dims [8] but the model configuration specifies dims [4]"),
    ({"name": "X", "data_type": "TYPE_FP32", "dims": [4], "optional": True},  # Triton's: unset optional is False
     "model 'm', tensor 'X': the model expects optional True but the model configuration specifies optional False"),
    ({"name": "X", "data_type": "TYPE_FP32", "dims": [4], "format": "FORMAT_NCHW"},
     ("input 'X' in auto-complete-config function for model 'm' contains property other than 'name', 'data_type', "
      "'dims' and 'optional'.")),
    ({"name": "Y", "dims": [4]}, ("input 'Y' in auto-complete-config function for model 'm' is missing 'data_type' "
                                  "property.")),
    ({"data_type": "TYPE_FP32", "dims": [4]},
     "input in auto-complete-config function for model 'm' is missing 'name' property."),
])
def test_add_input_refusals(tensor, message):
    with pytest.raises(ValueError) as info:
        partial().add_input(tensor)
    assert str(info.value) == message


def test_add_output_refuses_optional_and_missing_dims():
    config = partial()
    with pytest.raises(ValueError, match="output 'Y' in auto-complete-config function for model 'm' contains "
                                         "property other than 'name', 'data_type' and 'dims'."):
        config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [1], "optional": True})
    with pytest.raises(ValueError, match="output 'Y' in auto-complete-config function for model 'm' is missing "
                                         "'dims' property."):
        config.add_output({"name": "Y", "data_type": "TYPE_FP32"})
    config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [1]})
    assert config.as_dict()["output"] == [{"name": "Y", "data_type": "TYPE_FP32", "dims": [1]}]


def test_set_max_batch_size_may_not_lower_the_configured_one():
    config = partial(extra="max_batch_size: 8")
    config.set_max_batch_size(16)
    assert config.as_dict()["max_batch_size"] == 16
    with pytest.raises(ValueError) as info:
        config.set_max_batch_size(4)
    assert str(info.value) == ("configuration specified max_batch_size 16, but in auto-complete-config function for "
                               "model 'm' specified max_batch_size 4")


def test_set_dynamic_batching_keeps_a_configured_batcher_and_refuses_another_scheduler():
    config = partial(extra="dynamic_batching { max_queue_delay_microseconds: 7 }")
    config.set_dynamic_batching()
    assert config.as_dict()["dynamic_batching"]["max_queue_delay_microseconds"] == 7
    sequence = partial(extra="sequence_batching { }")
    with pytest.raises(ValueError, match="Configuration specified scheduling_choice as 'sequence_batching', but "
                                         "auto-complete-config function for model 'm' tries to set scheduling_choice "
                                         "as 'dynamic_batching'"):
        sequence.set_dynamic_batching()


def test_set_model_transaction_policy():
    config = partial()
    config.set_model_transaction_policy({"decoupled": True})
    assert config.as_dict()["model_transaction_policy"] == {"decoupled": True}
    with pytest.raises(ValueError, match="trying to change decoupled property in auto-complete-config for model 'm', "
                                         "which is already set to 'True'."):
        config.set_model_transaction_policy({"decoupled": False})
    with pytest.raises(ValueError, match="contains property other than 'decoupled'."):
        config.set_model_transaction_policy({"streaming": True})


def write_model(root: Path, body: str, config: str | None = None) -> Path:
    model_dir = root / "m"
    (model_dir / "1").mkdir(parents=True)
    if config is not None:
        (model_dir / "config.pbtxt").write_text(config)
    (model_dir / "1" / "model.py").write_text(body)
    return model_dir


def test_a_model_without_auto_complete_config_keeps_its_config(tmp_path):
    model_dir = write_model(tmp_path, "class TritonPythonModel:\n    pass\n",
                            'backend: "python" output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]')
    assert [t.name for t in load_model(str(model_dir)).config.outputs] == ["Y"]


def test_a_config_that_does_not_parse_back_is_refused(tmp_path):
    body = ("class TritonPythonModel:\n    @staticmethod\n    def auto_complete_config(c):\n"
            "        c.as_dict()['max_batch_size'] = 'many'\n        return c\n")
    with pytest.raises(ModelRepositoryError, match="auto_complete_config of model 'm' .* returned an invalid model "
                                                   "configuration"):
        load_model(str(write_model(tmp_path, body)))


def test_a_model_that_exits_is_refused(tmp_path):
    body = ("import os\nclass TritonPythonModel:\n    @staticmethod\n    def auto_complete_config(c):\n"
            "        os._exit(3)\n")
    with pytest.raises(ModelRepositoryError, match="auto-complete of model 'm': the process running its "
                                                   "auto_complete_config exited with code 3 before it answered"):
        load_model(str(write_model(tmp_path, body)))
