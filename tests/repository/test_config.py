"""Reading a model repository: config.pbtxt into the served configuration, version policies, and the refusals of
configs that cannot be served (each naming the file and the field)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytriton.repository import ModelRepositoryError, load_model, load_repositories, load_versions
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


def test_a_dynamic_batcher_without_a_batch_dimension_keeps_its_queue_policy(tmp_path):
    """As tritonserver 2.51: `dynamic_batching` with max_batch_size 0 loads; it batches nothing, its queue policy
    applies (tests/e2e/test_triton_parity_queue.py), and the config shows it."""
    config = load_model(str(make_model(tmp_path, "m", 'backend: "python" dynamic_batching { default_queue_policy { '
                                                      'max_queue_size: 3 } }' + TENSORS))).config
    assert config.max_batch_size == 0 and config.batcher is not None
    assert config.to_triton_dict()["dynamic_batching"]["default_queue_policy"]["max_queue_size"] == 3


def test_missing_name_takes_the_folder_name(tmp_path):
    model_dir = make_model(tmp_path, "m", 'backend: "python"' + TENSORS)
    assert load_model(str(model_dir)).config.model_name == "m"


@pytest.mark.parametrize("config, field, problem", [
    ('name: "other" backend: "python"' + TENSORS, "name", "must match its directory: 'other' is in directory 'm'"),
    ('backend: "onnxruntime"' + TENSORS, "backend", "got 'onnxruntime'"),
    ('platform: "ensemble"' + TENSORS, "ensemble_scheduling.step", "must specify 'step' for ensemble 'm'"),
    ('backend: "python" max_batch_size: -1' + TENSORS, "max_batch_size", "must be >= 0, got -1"),
    ('backend: "python" input [ { name: "X" dims: [ 2 ] } ] output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]',
     "input[0].data_type", "tensor 'X' needs a data type (e.g. TYPE_FP32), got TYPE_INVALID"),
    ('backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 0 ] } ] '
     'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]', "input[0].dims", "must be >= 1 or -1"),
    ('backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]', "output",
     "declares no output"),
    ('backend: "python" instance_group [ { kind: KIND_CPU }, { kind: KIND_MODEL gpus: [ 0 ] } ]' + TENSORS,
     "instance_group[1].gpus", "instance group m_1 of model m has kind KIND_MODEL but specifies one or more GPUs"),
    ('backend: "python" instance_group [ { kind: KIND_CPU }, { count: -2 } ]' + TENSORS, "instance_group[1].count",
     "must be >= 1, got -2"),
    ('backend: "python" model_repository_agents { agents [ { name: "checksum" } ] }' + TENSORS,
     "model_repository_agents.agents[0].name", "unable to find 'libtritonrepoagent_checksum.so' for repo agent "
     "'checksum' (repository agents are not supported)"),  # Triton's wording, where the library is missing
    ('backend: "python" instance_group [ { kind: KIND_MODEL gpus: [ 0 ] } ]' + TENSORS, "instance_group[0].gpus",
     "instance group m_0 of model m has kind KIND_MODEL but specifies one or more GPUs"),  # Triton's wording
    ('backend: "python" sequence_batching { state [ { input_name: "IS" output_name: "OS" data_type: TYPE_INT32 '
     'dims: [ 1 ] initial_state { data_type: TYPE_INT32 dims: [ 1 ] data_file: "nope" } } ] }' + TENSORS,
     "sequence_batching.state.initial_state.data_file", "failed to read initial state file 'nope'"),
    ('backend: "python" sequence_batching { state [ { input_name: "IS" output_name: "OS" data_type: TYPE_INT32 '
     'dims: [ 1 ] initial_state { data_type: TYPE_INT32 dims: [ 1 ] } } ] }' + TENSORS,
     "sequence_batching", "initial state for 'IS' must set 'zero_data' or 'data_file'"),
    ('backend: "python" sequence_batching { control_input [ { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID '
     'data_type: TYPE_FP32 } ] } ] }' + TENSORS, "sequence_batching", "unexpected data type for control "
     "CONTROL_SEQUENCE_CORRID"),
    ('backend: "python" output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] label_filename: "nope.txt" } ]',
     "output[0].label_filename", "cannot read label file"),
    ('backend: "python" version_policy: { specific: { versions: [ 4 ] } }' + TENSORS, "version_policy",
     "version 4 is listed but has no folder (versions found: [1])"),
    (('backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 2, 3 ] reshape: { shape: [ 5 ] } } ] '
      'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]'), "input[0].reshape",
     "model input 'X' has different size for dims and reshape for m"),  # Triton's wording
    (('backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ -1, 3 ] reshape: { shape: [ 3, 2 ] } } ] '
      'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]'), "input[0].reshape",
     "model input 'X' has different size for dims and reshape for m"),
    (('backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 2, -1, 3 ] reshape: { shape: [ 3, -1, 2 ] } '
      '} ] output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]'), "input[0].reshape",
     "model input 'X' has different size for dims and reshape for m"),
    (('backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 6 ] } ] '
      'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 6 ] reshape: { shape: [ 4 ] } } ]'), "output[0].reshape",
     "model output 'Y' has different size for dims and reshape for m"),
    (('backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 6 ] reshape: { shape: [ 0 ] } } ] '
      'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 6 ] } ]'), "input[0].reshape",
     "dimensions must be >= 1 or -1 (variable), got [0]"),
])
def test_invalid_configs_name_file_and_field(tmp_path, config, field, problem):
    message = refused(tmp_path, config)
    assert message.startswith(f"{tmp_path / 'm' / 'config.pbtxt'}: field '{field}' of model ")
    assert problem in message


def test_reshapes_that_keep_the_element_counts_are_served(tmp_path):
    config = load_model(str(make_model(tmp_path, "m", (
        'backend: "python" max_batch_size: 2 input [ { name: "X" data_type: TYPE_FP32 dims: [ -1, 6 ] '
        'reshape: { shape: [ -1, 2, 3 ] } }, { name: "S" data_type: TYPE_FP32 dims: [ 1 ] reshape: { } } ] '
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2, 3 ] reshape: { shape: [ 6 ] } } ]')))).config
    assert [(t.shape, t.reshape) for t in config.inputs] == [((-1, 6), (-1, 2, 3)), ((1,), ())]
    assert config.outputs[0].reshape == (6,)
    assert config.to_triton_dict()["input"][1]["reshape"] == {"shape": []}


def test_a_decoupled_model_may_batch_dynamically(tmp_path):
    model_dir = make_model(tmp_path, "m", 'backend: "python" max_batch_size: 2 model_transaction_policy { decoupled: '
                           'true } dynamic_batching { max_queue_delay_microseconds: 500 }' + TENSORS)
    config = load_model(str(model_dir)).config
    assert config.decoupled and config.batcher is not None and config.batcher.max_queue_delay_microseconds == 500


def test_kind_model_instances_get_no_gpu(tmp_path):
    config = load_model(str(make_model(tmp_path, "m", 'backend: "python" instance_group [ { kind: KIND_MODEL count: 3 '
                                       '} ]' + TENSORS))).config
    assert [(p.name, p.kind, p.device) for p in config.instance_places()] == [
        ("m_0_0", "MODEL", None), ("m_0_1", "MODEL", None), ("m_0_2", "MODEL", None)]
    assert config.to_triton_dict()["instance_group"] == [{
        "name": "m_0", "kind": "KIND_MODEL", "count": 3, "gpus": [], "secondary_devices": [], "profile": [],
        "passive": False, "host_policy": ""}]  # as Triton 2.51 shows it


WARMUP = ('backend: "python" max_batch_size: 2' + TENSORS + 'model_warmup [ { name: "w" batch_size: 1 inputs { key: "X" '
          'value: { data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "FILE" } } } ]')


def test_model_warmup_is_served_with_its_file_from_the_warmup_folder(tmp_path):
    model_dir = make_model(tmp_path, "m", WARMUP.replace("FILE", "x.bin"))
    (model_dir / "warmup").mkdir()
    (model_dir / "warmup" / "x.bin").write_bytes(bytes(range(12)))  # (more than the 8 bytes needed: taken, as Triton)
    config = load_model(str(model_dir)).config
    [sample] = config.warmup
    assert (sample.name, sample.batch_size, sample.executions, sample.inputs[0].data) == ("w", 1, 1, bytes(range(12)))
    assert config.to_triton_dict()["model_warmup"] == [{"name": "w", "batch_size": 1, "count": 0, "inputs": {
        "X": {"data_type": "TYPE_FP32", "dims": [2], "input_data_file": "x.bin"}}}]
    assert type(config).from_dict(config.to_dict()).warmup == config.warmup  # (what the worker gets)


@pytest.mark.parametrize(("file", "problem"), [
    ("../../outside.bin", "warmup data file path '../../outside.bin' in model 'm' is outside model directory"),
    ("/etc/passwd", "warmup data file path '/etc/passwd' in model 'm' is outside model directory"),
    ("nope.bin", "failed to open text file for read "),  # (Triton's wording)
    ("short.bin", "[request id: <id_unknown>] warmup setting expects 8 bytes, but the data provided from "
                  "short.binonly has 4 bytes"),  # (Triton's wording, its missing space too)
])
def test_a_warmup_file_must_be_in_the_model_folder_and_long_enough(tmp_path, file, problem):
    (tmp_path / "outside.bin").write_bytes(bytes(8))
    model_dir = make_model(tmp_path / "repo", "m", WARMUP.replace("FILE", file))
    (model_dir / "warmup").mkdir()
    (model_dir / "warmup" / "short.bin").write_bytes(bytes(4))
    with pytest.raises(ModelRepositoryError) as info:
        load_model(str(model_dir))
    assert "field 'model_warmup[0].inputs['X'].input_data_file' of model 'm': " + problem in str(info.value)


def test_a_warmup_sample_without_a_required_input_is_refused_in_tritons_words(tmp_path):
    config = ('backend: "python" max_batch_size: 2 input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] }, '
              '{ name: "B" data_type: TYPE_FP32 dims: [ 1 ] } ] output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ] '
              'model_warmup [ { name: "w" batch_size: 1 inputs { key: "A" value: { data_type: TYPE_FP32 dims: [ 1 ] '
              'zero_data: true } } } ]')
    assert ("field 'model_warmup[0].inputs' of model 'm': [request id: <id_unknown>] expected 2 inputs but got 1 "
            "inputs for model 'm'. Got input(s) ['A'], but missing required input(s) ['B']. Please provide all "
            "required input(s).") in refused(tmp_path, config)


def test_unsupported_fields_are_listed():
    assert "model_repository_agents" not in UNSUPPORTED_FIELDS and "ensemble_scheduling" not in UNSUPPORTED_FIELDS
    assert "sequence_batching" not in UNSUPPORTED_FIELDS and "model_warmup" not in UNSUPPORTED_FIELDS
    assert "batch_input" not in UNSUPPORTED_FIELDS and "batch_output" not in UNSUPPORTED_FIELDS


BATCH_IO = ('backend: "python" max_batch_size: 4' + TENSORS + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: '
            '"BEC" data_type: TYPE_INT32 source_input: "X" } ] batch_output [ { target_name: "Y" kind: '
            'BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "X" } ]')


def test_batch_input_and_output_are_taken_and_shown_as_triton_takes_them(tmp_path):
    """Triton 2.51 checks them and loads the model; its Python backend gives the model nothing more (no batch input
    tensor in a request: tests/e2e/test_batch_io.py), and the model's args show them."""
    config = load_model(str(make_model(tmp_path, "m", BATCH_IO))).config
    shown = config.to_triton_dict()
    assert shown["batch_input"] == [
        {"kind": "BATCH_ELEMENT_COUNT", "target_name": ["BEC"], "data_type": "TYPE_INT32", "source_input": ["X"]}]
    assert shown["batch_output"] == [
        {"target_name": ["Y"], "kind": "BATCH_SCATTER_WITH_INPUT_SHAPE", "source_input": ["X"]}]
    assert type(config).from_dict(config.to_dict()).to_triton_dict() == shown


@pytest.mark.parametrize(("edit", "field", "problem"), [  # Triton's words (ValidateBatchIO)
    (('source_input: "X" } ] batch_output', 'source_input: "NOPE" } ] batch_output'), "batch_input",
     "unknown source input name 'NOPE' for m"),
    (("TYPE_INT32 source_input", "TYPE_INT64 source_input"), "batch_input",
     "batch input data type must be TYPE_INT32 or TYPE_FP32 for m"),
    (('data_type: TYPE_INT32 source_input: "X"', 'data_type: TYPE_INT32 source_input: [ "X", "X" ]'), "batch_input",
     "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 source input, got 2 for m"),
    (('kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "X"', 'source_input: "NOPE"'), "batch_output",
     "unknown source input name 'NOPE' for m"),
    (('target_name: "Y"', 'target_name: "Z"'), "batch_output", "unknown target output name 'Z' for m"),
])
def test_batch_input_and_output_are_checked_in_tritons_words(tmp_path, edit, field, problem):
    message = refused(tmp_path, BATCH_IO.replace(*edit))
    assert f"field '{field}'" in message and problem in message, message


def test_sequence_batching_is_served_as_written(tmp_path):
    config = load_model(str(make_model(tmp_path, "m", (
        'backend: "python" max_batch_size: 4 sequence_batching { oldest { max_candidate_sequences: 3 } control_input '
        '[ { name: "S" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 2.5 ] } ] }, { name: "ID" '
        'control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } ] } ] }' + TENSORS)))).config
    shown = config.to_triton_dict()["sequence_batching"]
    assert shown["max_sequence_idle_microseconds"] == 1000000  # Triton's default
    assert shown["oldest"]["max_candidate_sequences"] == 3 and shown["oldest"]["preferred_batch_size"] == [4]
    assert shown["control_input"] == [
        {"name": "S", "control": [{"kind": "CONTROL_SEQUENCE_START", "fp32_false_true": [0.0, 2.5]}]},
        {"name": "ID", "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_STRING"}]}]
    assert type(config).from_dict(config.to_dict()).to_triton_dict()["sequence_batching"] == shown


def test_an_iterative_sequence_is_served_and_shown_as_written(tmp_path):
    config = load_model(str(make_model(tmp_path, "m", (
        'backend: "python" model_transaction_policy { decoupled: true } sequence_batching { iterative_sequence: true '
        '}' + TENSORS)))).config
    assert config.sequence_batcher is not None and config.sequence_batcher.iterative
    shown = config.to_triton_dict()["sequence_batching"]
    assert shown["iterative_sequence"] is True
    assert type(config).from_dict(config.to_dict()).to_triton_dict()["sequence_batching"] == shown


@pytest.mark.parametrize(("policy", "served"), [
    ("all { }", [1, 2, 3]),
    ("latest { num_versions: 2 }", [2, 3]),
    ("specific { versions: [ 3, 1 ] }", [1, 3]),
])
def test_a_policy_selecting_several_versions_serves_each(tmp_path, policy, served):
    """One RepositoryModel per version, lowest first, each with its own version and version folder's model.py."""
    config = (REPOS / "versions" / "multi" / "config.pbtxt").read_text().replace("all { }", policy)
    model_dir = make_model(tmp_path, "multi", config, ("1", "2", "3"))
    models = load_versions(str(model_dir))
    assert [m.config.model_version for m in models] == served
    assert [m.target.rsplit("/", 2)[-2] for m in models] == [str(v) for v in served]
    assert load_model(str(model_dir)).config.model_version == served[-1]
    assert [m.config.model_version for m in load_repositories([str(tmp_path)])] == served


def test_a_syntax_error_names_the_file_and_position(tmp_path):
    message = refused(tmp_path, 'backend: "python"\nmax_batch_size: eight')
    assert message.startswith(f"{tmp_path / 'm' / 'config.pbtxt'}: invalid model configuration: 2:")


def test_a_config_that_is_not_utf8_is_refused_with_the_file(tmp_path):
    """Found by fuzzing (tests/fuzz, harness model_config): a byte that is not UTF-8 escaped as UnicodeDecodeError,
    which named no file and, at start-up, stopped the server with a traceback."""
    model_dir = make_model(tmp_path, "m", None)
    (model_dir / "config.pbtxt").write_bytes(b'backend: "python"\n'
                                             b'parameters { key: "k" value { string_value: "\x95" } }')
    with pytest.raises(ModelRepositoryError) as info:
        load_model(str(model_dir))
    assert str(info.value) == (f"{model_dir / 'config.pbtxt'}: invalid model configuration: not UTF-8 text "
                               "(invalid start byte 0x95 at byte 63)")
    with pytest.raises(ModelRepositoryError, match="not UTF-8 text"):
        load_repositories([str(tmp_path)])


def test_an_enum_number_out_of_range_is_refused_with_the_file(tmp_path):
    """Found by fuzzing (tests/fuzz, harness model_config): protobuf's text format raises ValueError, not ParseError,
    for an enum number past 32 bits, and it escaped."""
    message = refused(tmp_path, 'backend: "python" input [ { name: "X" data_type: 2222222222 dims: [ 1 ] } ]')
    assert message == (f"{tmp_path / 'm' / 'config.pbtxt'}: invalid model configuration: Value out of range: "
                       "2222222222")


@pytest.mark.parametrize("field, config, problem", [
    ("input[0].data_type", 'input [ { name: "X" data_type: 32 dims: [ 1 ] } ]',
     "tensor 'X' needs a data type (e.g. TYPE_FP32), got 32"),
    ("output[0].data_type", 'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ] '
                            'output [ { name: "Y" data_type: -3 dims: [ 1 ] } ]',
     "tensor 'Y' needs a data type (e.g. TYPE_FP32), got -3"),
    ("instance_group[0].kind", TENSORS + "instance_group [ { kind: 99 } ]",
     "99 is not supported (KIND_CPU, KIND_GPU, KIND_AUTO or KIND_MODEL)"),
    ("dynamic_batching", "max_batch_size: 4" + TENSORS + "dynamic_batching { default_queue_policy { timeout_action: 7 } }",
     "timeout_action 7 is not one of REJECT, DELAY"),
    ("dynamic_batching", "max_batch_size: 4" + TENSORS + "dynamic_batching { priority_levels: 2 "
                         "priority_queue_policy { key: 1 value { timeout_action: 9 } } }",
     "timeout_action 9 is not one of REJECT, DELAY"),
    ("sequence_batching", "max_batch_size: 4" + TENSORS + 'sequence_batching { control_input [ { name: "S" '
                          "control [ { kind: 9 int32_false_true: [ 0, 1 ] } ] } ] }",
     "control kind 9 is not one of CONTROL_SEQUENCE_START, CONTROL_SEQUENCE_END, CONTROL_SEQUENCE_READY, "
     "CONTROL_SEQUENCE_CORRID"),
])
def test_an_enum_number_without_a_name_is_refused_with_the_field(tmp_path, field, config, problem):
    """Found by fuzzing (tests/fuzz, harness model_config; the batchers' cases by trying the same input on the other
    enums): proto3 enums keep numbers they have no name for, and `Enum.Name` or the batchers' readers raised ValueError
    for them, which escaped."""
    message = refused(tmp_path, 'backend: "python" ' + config)
    assert message == f"{tmp_path / 'm' / 'config.pbtxt'}: field '{field}' of model 'm': {problem}"


def test_a_label_file_that_is_not_utf8_is_refused_with_the_field(tmp_path):
    """The same for a label file (read as UTF-8 text like config.pbtxt)."""
    model_dir = make_model(tmp_path, "m", 'backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ] '
                           'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] label_filename: "l.txt" } ]')
    (model_dir / "l.txt").write_bytes(b"cat\n\xff\n")
    with pytest.raises(ModelRepositoryError) as info:
        load_model(str(model_dir))
    assert str(info.value) == (f"{model_dir / 'config.pbtxt'}: field 'output[0].label_filename' of model 'm': label "
                               f"file '{model_dir / 'l.txt'}' is not UTF-8 text (invalid start byte 0xff at byte 4)")


def test_a_label_file_name_with_a_nul_is_refused_with_the_field(tmp_path):
    """Found by fuzzing (tests/fuzz, harness model_config): open() refused the name with ValueError, which escaped
    (fixed meanwhile on main by `repository.files.model_file`, which takes no name with a NUL)."""
    message = refused(tmp_path, 'backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ] output [ '
                                '{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] label_filename: "l\\000.txt" } ]')
    assert message == (f"{tmp_path / 'm' / 'config.pbtxt'}: field 'output[0].label_filename' of model 'm': label file "
                       "path 'l\\x00.txt' for output 'Y' in model 'm' is outside model directory")


def test_preferred_batch_size_above_max_is_refused_with_the_file(tmp_path):
    message = refused(tmp_path, 'backend: "python" max_batch_size: 2 dynamic_batching { preferred_batch_size: [ 4 ] }'
                      + TENSORS)
    assert message.startswith(str(tmp_path / "m" / "config.pbtxt"))
    assert "dynamic batching preferred size must be <= max batch size for m" in message


def test_missing_config_is_refused_when_auto_complete_is_off(tmp_path):
    model_dir = make_model(tmp_path, "m", None)
    with pytest.raises(ModelRepositoryError, match=r"Poll failed for model directory 'm': failed to open text file "
                                                   r"for read .*/m/config.pbtxt: No such file or directory"):
        load_model(str(model_dir), auto_complete=False)


def test_missing_backend_is_python_when_the_model_file_is_model_py(tmp_path):
    """As Triton fills it in (with auto-complete on or off)."""
    for auto_complete in (True, False):
        model_dir = make_model(tmp_path / str(auto_complete), "m", TENSORS)
        assert load_model(str(model_dir), auto_complete=auto_complete).config.model_name == "m"
    model_dir = make_model(tmp_path / "other", "m", 'default_model_filename: "net.py"' + TENSORS)
    (model_dir / "1" / "model.py").rename(model_dir / "1" / "net.py")  # no model.py: no backend filled in
    message = str(pytest.raises(ModelRepositoryError, load_model, str(model_dir)).value)
    assert "field 'backend' of model 'm': only Python-backend models and Python-based backends are supported" in message


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
