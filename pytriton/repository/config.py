"""A Triton model's `config.pbtxt` read into tritonclient's `ModelConfig` and turned into the `TritonModelConfig` the
server serves; a field it cannot take is refused with the file and the field named."""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Callable, Sequence
from typing import Any, cast

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2 as pb

from pytriton.config.gpus import GpuDevice, GpuSelectionError, select_gpus
from pytriton.core.validation import BATCH_NOTE, dims_str
from pytriton.exceptions import PyTritonError
from pytriton.model_config.datatypes import CONFIG_TO_TRITON
from pytriton.model_config.instance_groups import InstanceGroup
from pytriton.model_config.names import shown
from pytriton.model_config.sequence import SequenceBatcher, sequence_batcher_from_triton
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig, batcher_from_triton
from pytriton.model_config.warmup import WarmupInput, WarmupSample
from pytriton.repository.ensemble_config import check_ensemble, is_ensemble
from pytriton.repository.files import model_file, outside

CONFIG_FILE = "config.pbtxt"
DEFAULT_MODEL_FILENAME = "model.py"
# Fields of model_config.proto this server cannot honour yet: a config that sets one is refused, never half-served.
UNSUPPORTED_FIELDS: tuple[str, ...] = ()
# An ensemble takes none of these either (Triton runs batch inputs and outputs in a backend, not in an ensemble)
ENSEMBLE_UNSUPPORTED_FIELDS = ("batch_input", "batch_output", *UNSUPPORTED_FIELDS)


class ModelRepositoryError(PyTritonError):
    """A model repository (or one model's config.pbtxt) that cannot be served."""


class PollFailure(ModelRepositoryError):
    """A model folder Triton fails to poll (its model is not found in the repository): one that names a repository
    agent, as no agent library is installed here."""


def _check_repository_agents(config: pb.ModelConfig, where: _Fields) -> None:
    """Triton runs a model's repository agents (shared libraries, `libtritonrepoagent_<name>.so`) when it polls the
    model folder; this server has none, so a config naming one fails as in a Triton build without that library."""
    for index, agent in enumerate(config.model_repository_agents.agents):
        raise PollFailure(where.error(f"model_repository_agents.agents[{index}].name", (
            f"unable to find 'libtritonrepoagent_{agent.name}.so' for repo agent '{agent.name}' (repository agents "
            "are not supported)")).message)


def read_model_config(path: str) -> pb.ModelConfig:
    """Parse `path` (protobuf text format) into a `ModelConfig`; ModelRepositoryError naming the file otherwise."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ModelRepositoryError(f"{path}: cannot read the model configuration: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelRepositoryError(f"{path}: invalid model configuration: {_not_utf8(exc)}") from None
    try:
        return text_format.Parse(text, pb.ModelConfig())
    except (text_format.ParseError, ValueError) as exc:  # (ValueError: e.g. an enum number past 32 bits)
        raise ModelRepositoryError(f"{path}: invalid model configuration: {exc}") from None


def _not_utf8(exc: UnicodeDecodeError) -> str:
    return f"not UTF-8 text ({exc.reason} 0x{exc.object[exc.start]:02x} at byte {exc.start})"


def _enum_name(enum: Any, number: int) -> str:
    """The name of an enum value; proto3 keeps a number it has no name for, shown as the number."""
    return enum.Name(number) if number in enum.values() else str(number)


def _as_dict(message: Any) -> dict[str, Any]:
    return cast(dict[str, Any], json_format.MessageToDict(message, preserving_proto_field_name=True))


class _Fields:
    """Error messages naming the config file and the field."""

    def __init__(self, path: str, model: str):
        self.path = path
        self.model = model

    def error(self, field: str, problem: str) -> ModelRepositoryError:
        return ModelRepositoryError(f"{self.path}: field '{field}' of model '{self.model}': {problem}")


def _pieces(dims: Sequence[int]) -> list[int]:
    """The element counts of the runs of fixed dimensions between variable ones (-1): `dims` and `reshape` must
    agree on them, as Triton requires (e.g. [-1, 6] and [-1, 2, 3] do; [-1, 3] and [3, -1] do not)."""
    counts, count = [], 1
    for d in dims:
        if d == -1:
            counts.append(count)
            count = 1
        else:
            count *= d
    return [*counts, count]


def _tensors(config: pb.ModelConfig, kind: str, where: _Fields) -> list[TensorSpec]:
    specs = []
    for index, entry in enumerate(getattr(config, kind)):
        field = f"{kind}[{index}]"
        if not entry.name:
            raise where.error(f"{field}.name", "a tensor needs a name")
        datatype = CONFIG_TO_TRITON.get(_enum_name(pb.DataType, entry.data_type))
        if datatype is None:
            raise where.error(f"{field}.data_type", f"tensor '{entry.name}' needs a data type (e.g. TYPE_FP32), got "
                                                    f"{_enum_name(pb.DataType, entry.data_type)}")
        dims = list(entry.dims)
        if any(d == 0 or d < -1 for d in dims):
            raise where.error(f"{field}.dims", f"tensor '{entry.name}': dimensions must be >= 1 or -1 (variable), "
                                               f"got {dims}")
        reshape = None
        if entry.HasField("reshape"):
            reshape = tuple(int(d) for d in entry.reshape.shape)
            if any(d == 0 or d < -1 for d in reshape):
                raise where.error(f"{field}.reshape", f"tensor '{entry.name}': dimensions must be >= 1 or -1 "
                                                      f"(variable), got {list(reshape)}")
            if _pieces(dims) != _pieces(reshape):  # Triton's rule and wording
                raise where.error(f"{field}.reshape", f"model {kind} '{entry.name}' has different size for dims and "
                                                      f"reshape for {where.model}")
        specs.append(TensorSpec(entry.name, datatype, tuple(dims), bool(getattr(entry, "optional", False)), reshape,
                                bool(getattr(entry, "allow_ragged_batch", False))))
    return specs


def _labels(config: pb.ModelConfig, model_dir: str, where: _Fields) -> tuple[dict[str, list[str]], dict[str, str]]:
    labels: dict[str, list[str]] = {}
    files: dict[str, str] = {}
    for index, entry in enumerate(config.output):
        if not entry.label_filename:
            continue
        path = model_file(model_dir, entry.label_filename)
        if path is None:  # (Triton's check and wording; its status is UNSUPPORTED, a load's failure here)
            raise where.error(f"output[{index}].label_filename", outside(
                "label", shown(entry.label_filename), where.model, f" for output '{entry.name}'"))
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8")
        except OSError as exc:
            raise where.error(f"output[{index}].label_filename",
                              f"cannot read label file '{path}': {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise where.error(f"output[{index}].label_filename",
                              f"label file '{path}' is {_not_utf8(exc)}") from None
        labels[entry.name] = [line.rstrip("\r\n") for line in io.StringIO(text, newline=None)]
        files[entry.name] = entry.label_filename
    return labels, files


def _group(group: pb.ModelInstanceGroup, index: int, where: _Fields,
           gpus: Callable[[], Sequence[GpuDevice]]) -> InstanceGroup:
    """Instance group `index` normalised as Triton does: its default name <model>_<index> and count 1, KIND_AUTO
    resolved (GPU when GPUs are visible), a KIND_GPU group without ids on every visible GPU."""
    field = f"instance_group[{index}]"
    name = group.name or f"{where.model}_{index}"
    count = group.count or 1  # Triton's default
    if count < 1:
        raise where.error(f"{field}.count", f"must be >= 1, got {count}")
    kind = _enum_name(pb.ModelInstanceGroup.Kind, group.kind)
    if kind == "KIND_CPU":
        return InstanceGroup(name, kind, count)
    if kind == "KIND_MODEL":
        if group.gpus:  # (Triton's check and wording)
            raise where.error(f"{field}.gpus", f"instance group {name} of model {where.model} has kind KIND_MODEL but "
                                               "specifies one or more GPUs")
        return InstanceGroup(name, kind, count)
    if kind not in ("KIND_GPU", "KIND_AUTO"):
        raise where.error(f"{field}.kind", f"{kind} is not supported (KIND_CPU, KIND_GPU, KIND_AUTO or KIND_MODEL)")
    try:
        selected = select_gpus(where.model, "gpu" if kind == "KIND_GPU" else "auto", list(group.gpus) or None, gpus())
    except GpuSelectionError as exc:
        raise where.error(f"{field}.gpus", str(exc)) from None
    return InstanceGroup(name, "KIND_GPU" if selected else "KIND_CPU", count, tuple(selected))


def _instances(config: pb.ModelConfig, where: _Fields,
               gpus: Callable[[], Sequence[GpuDevice]]) -> list[InstanceGroup]:
    """The model's instance groups, normalised as Triton does, one or several alike (Triton names a lone group as it
    names the first of several: `<model>_0` unless named, its instances `<group>_<c>`); without `instance_group`,
    Triton's default group: named after the model, KIND_AUTO, count 1 (its instances are <model>_0)."""
    if not config.instance_group:
        return [_group(pb.ModelInstanceGroup(name=where.model), 0, where, gpus)]
    return [_group(group, index, where, gpus) for index, group in enumerate(config.instance_group)]


def version_policy(config: pb.ModelConfig) -> dict[str, Any]:
    """The version policy as Triton shows it (its default: the latest version)."""
    choice = config.version_policy.WhichOneof("policy_choice")
    if choice == "all":
        return {"all": {}}
    if choice == "specific":
        return {"specific": {"versions": [int(v) for v in config.version_policy.specific.versions]}}
    if choice == "latest":
        return {"latest": {"num_versions": int(config.version_policy.latest.num_versions)}}
    return {"latest": {"num_versions": 1}}


def _ensemble_config(config: pb.ModelConfig, path: str, version: int, where: _Fields) -> TritonModelConfig:
    """The served configuration of an ensemble (its steps are checked against their models when it loads)."""
    if config.max_batch_size < 0:
        raise where.error("max_batch_size", f"must be >= 0, got {config.max_batch_size}")
    inputs = _tensors(config, "input", where)
    outputs = _tensors(config, "output", where)
    if not outputs:
        raise where.error("output", "the model declares no output (at least one is required)")
    scheduling = check_ensemble(config, where.model, inputs, outputs, where.error)
    _check_repository_agents(config, where)
    present = {f.name for f, _ in config.ListFields()}
    for field in ENSEMBLE_UNSUPPORTED_FIELDS:
        if field in present:
            raise where.error(field, "is not supported yet")
    try:
        return TritonModelConfig(
            model_name=where.model, inputs=inputs, outputs=outputs, model_version=version,
            max_batch_size=config.max_batch_size, version_policy=version_policy(config), ensemble_scheduling=scheduling,
            response_cache=config.response_cache.enable,
            backend_parameters={k: v.string_value for k, v in config.parameters.items()},
        )
    except PyTritonError as exc:
        raise ModelRepositoryError(f"{path}: {exc}") from None


def to_model_config(config: pb.ModelConfig, path: str, model_dir: str, version: int,
                    gpus: Callable[[], Sequence[GpuDevice]], served_name: str | None = None,
                    python_based: bool = False) -> TritonModelConfig:
    """The served configuration of `config` (read from `path`, in `model_dir`), serving `version`.

    `gpus` gives the visible GPUs (asked only for a KIND_GPU or KIND_AUTO instance group). `served_name`: the name a
    repository's name mapping gives the model folder; it replaces the configuration's name, as in Triton (without
    one, the name must match the folder). `python_based`: its backend is a Python-based backend (run as a Python
    model, shown with its own name).
    """
    folder = os.path.basename(os.path.normpath(model_dir))
    name = served_name or config.name or folder
    where = _Fields(path, name)
    if served_name is None and name != folder:
        raise where.error("name", f"the model name must match its directory: '{config.name}' is in directory "
                                  f"'{folder}'")
    if is_ensemble(config) or config.HasField("ensemble_scheduling"):
        return _ensemble_config(config, path, version, where)
    if config.backend != "python" and not python_based:
        got = f"'{config.backend}'" if config.backend else "none"
        raise where.error("backend", f"only Python-backend models and Python-based backends are supported (backend: "
                                     f"\"python\", or a backend whose model.py is in the backend directory: "
                                     f"--backend-directory), got {got}")
    for field in UNSUPPORTED_FIELDS:
        if field in {f.name for f, _ in config.ListFields()}:
            raise where.error(field, "is not supported yet")
    _check_repository_agents(config, where)
    if config.max_batch_size < 0:
        raise where.error("max_batch_size", f"must be >= 0, got {config.max_batch_size}")
    inputs = _tensors(config, "input", where)
    outputs = _tensors(config, "output", where)
    if not outputs:
        raise where.error("output", "the model declares no output (at least one is required)")
    decoupled = config.model_transaction_policy.decoupled
    batcher = None
    if config.HasField("dynamic_batching"):  # (with max_batch_size 0, as Triton: its queue policy without batching)
        try:
            batcher = batcher_from_triton(_as_dict(config.dynamic_batching))
        except PyTritonError as exc:
            raise where.error("dynamic_batching", str(exc)) from None
    sequence = _sequence_batcher(config, model_dir, where)
    batch_inputs, batch_outputs = _batch_io(config, where)
    groups = _instances(config, where, gpus)
    labels, label_files = _labels(config, model_dir, where)
    warmup = _warmup(config, model_dir, where, inputs)
    policy = version_policy(config)
    try:
        return TritonModelConfig(
            model_name=name, inputs=inputs, outputs=outputs, model_version=version,
            max_batch_size=config.max_batch_size, decoupled=decoupled,
            backend_parameters={k: v.string_value for k, v in config.parameters.items()}, batcher=batcher,
            device="gpu" if any(g.gpus for g in groups) else None, labels=labels,
            label_filenames=label_files, version_policy=policy,
            default_model_filename=config.default_model_filename or DEFAULT_MODEL_FILENAME,
            sequence_batcher=sequence,
            response_cache=config.response_cache.enable, warmup=warmup,
            instance_groups=groups,
            batch_inputs=batch_inputs, batch_outputs=batch_outputs, backend=config.backend or "python",
        )
    except PyTritonError as exc:
        raise ModelRepositoryError(f"{path}: {exc}") from None


def _initial_state(model_dir: str, name: str, where: _Fields) -> bytes:
    path = model_file(model_dir, name, "initial_state")
    if path is None:
        raise where.error("sequence_batching.state.initial_state.data_file",
                          outside("initial state", shown(name), where.model))
    if not os.path.isfile(path):
        raise where.error("sequence_batching.state.initial_state.data_file",
                          f"failed to read initial state file '{name}' in '{os.path.join(model_dir, 'initial_state')}'")
    with open(path, "rb") as file:
        return file.read()


def _sequence_batcher(config: pb.ModelConfig, model_dir: str, where: _Fields) -> SequenceBatcher | None:
    """`sequence_batching` (with `iterative_sequence`: see SequenceBatcher.iterative); an initial state's
    `data_file` is read from the model's `initial_state` folder, as Triton reads it."""
    if not config.HasField("sequence_batching"):
        return None
    sequence = config.sequence_batching  # (one of scheduling_choice: never beside dynamic_batching)
    try:
        return sequence_batcher_from_triton(_as_dict(sequence), lambda name: _initial_state(model_dir, name, where))
    except ModelRepositoryError:  # (already naming its field)
        raise
    except PyTritonError as exc:
        raise where.error("sequence_batching", str(exc)) from None


def _batch_io(config: pb.ModelConfig, where: _Fields) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`batch_input` and `batch_output` as Triton's JSON shows them, checked as Triton checks them (its words). Triton's
    Python backend computes no batch input and scatters no batch output: a Python model sees them only in its
    config, and the same goes here."""
    inputs = {spec.name for spec in config.input}
    outputs = {spec.name for spec in config.output}
    batch_inputs = []
    for entry in config.batch_input:
        kind = pb.BatchInput.Kind.Name(entry.kind)
        if len(entry.source_input) != 1:
            raise where.error("batch_input", f"batch input kind '{kind}' expects 1 source input, got "
                                             f"{len(entry.source_input)} for {where.model}")
        if entry.data_type not in (pb.TYPE_INT32, pb.TYPE_FP32):
            raise where.error("batch_input", f"batch input data type must be TYPE_INT32 or TYPE_FP32 for {where.model}")
        for source in entry.source_input:
            if source not in inputs:
                raise where.error("batch_input", f"unknown source input name '{source}' for {where.model}")
        batch_inputs.append({"kind": kind, "target_name": list(entry.target_name),
                             "data_type": pb.DataType.Name(entry.data_type), "source_input": list(entry.source_input)})
    batch_outputs = []
    for entry in config.batch_output:
        kind = pb.BatchOutput.Kind.Name(entry.kind)
        if len(entry.source_input) != 1:
            raise where.error("batch_output", f"batch output kind '{kind}' expects 1 source input, got "
                                              f"{len(entry.source_input)} for {where.model}")
        for source in entry.source_input:
            if source not in inputs:
                raise where.error("batch_output", f"unknown source input name '{source}' for {where.model}")
        targets: set[str] = set()
        for target in entry.target_name:
            if target not in outputs:
                raise where.error("batch_output", f"unknown target output name '{target}' for {where.model}")
            if target in targets:
                raise where.error("batch_output", f"target output name '{target}' can only be specified once for "
                                                  f"{where.model}")
            targets.add(target)
        batch_outputs.append({"target_name": list(entry.target_name), "kind": kind,
                              "source_input": list(entry.source_input)})
    return batch_inputs, batch_outputs


def _warmup(config: pb.ModelConfig, model_dir: str, where: _Fields, specs: list[TensorSpec]) -> list[WarmupSample]:
    """`model_warmup`: its samples, each input's data file read from the model's `warmup` folder (confined to the
    model's folder, see files.py) and checked against the bytes a request needs, in Triton's words. A sample must
    give every required input; one the model does not declare goes to the model as it is (Triton 2.51 does both)."""
    required = [spec.name for spec in specs if not spec.optional]
    by_name = {spec.name: spec for spec in specs}
    samples = []
    for index, sample in enumerate(config.model_warmup):
        field = f"model_warmup[{index}]"  # (a batch_size of 0 runs nothing, as in Triton 2.51)
        inputs = []
        for name, entry in sorted(sample.inputs.items()):
            at = f"{field}.inputs['{name}']"
            datatype = CONFIG_TO_TRITON.get(_enum_name(pb.DataType, entry.data_type))
            if datatype is None:
                raise where.error(f"{at}.data_type", f"warmup input '{name}' needs a data type (e.g. TYPE_FP32), got "
                                                     f"{_enum_name(pb.DataType, entry.data_type)}")
            dims = tuple(int(d) for d in entry.dims)
            if -1 in dims:  # (Triton's words)
                raise where.error(f"{at}.dims", "warmup setting expects all variable-size dimensions are specified "
                                                f"for input '{name}'")
            if any(d < 1 for d in dims):
                raise where.error(f"{at}.dims", f"warmup input '{name}': dimensions must be >= 1, got {list(dims)}")
            source = entry.WhichOneof("input_data_type")
            if source is None:  # (Triton's words)
                raise where.error(at, f"[request id: <id_unknown>] warmup setting expects input '{name}' to have "
                                      "input_data_type set")
            if name in by_name:
                _check_warmup_input(by_name[name], datatype, dims, config.max_batch_size, at, where)
            warm = WarmupInput(name, datatype, dims, source)
            if source == "input_data_file":
                warm = dataclasses.replace(warm, file=entry.input_data_file,
                                           data=_warmup_file(model_dir, entry.input_data_file, warm, at, where))
            inputs.append(warm)
        given = [warm.name for warm in inputs]
        if len(given) < len(required):  # (Triton's check and wording)
            head = (f"expected {len(specs)} inputs" if len(required) == len(specs)
                    else f"expected number of inputs between {len(required)} and {len(specs)}")
            missing = [name for name in required if name not in given]
            raise where.error(f"{field}.inputs", f"[request id: <id_unknown>] {head} but got {len(given)} inputs for "
                                                 f"model '{where.model}'. Got input(s) {_quoted(given)}, but missing "
                                                 f"required input(s) {_quoted(missing)}. Please provide all required "
                                                 "input(s).")
        samples.append(WarmupSample(sample.name, sample.batch_size, sample.count, tuple(inputs)))
    return samples


def _check_warmup_input(spec: TensorSpec, datatype: str, dims: tuple[int, ...], max_batch_size: int, at: str,
                        where: _Fields) -> None:
    """A warm-up input the model declares is checked as a request's would be, in Triton's words (2.51 refuses the
    load so); one it does not declare goes to the model unchecked, as there."""
    if datatype != spec.datatype:
        raise where.error(f"{at}.data_type", f"[request id: <id_unknown>] inference input '{spec.name}' data-type is "
                                             f"'{datatype}', but model '{where.model}' expects '{spec.datatype}'")
    if len(dims) != len(spec.shape) or any(w != -1 and w != g for w, g in zip(spec.shape, dims)):
        batched = max_batch_size > 0
        expected, got = ([-1] if batched else []) + list(spec.shape), ([1] if batched else []) + list(dims)
        raise where.error(f"{at}.dims", f"[request id: <id_unknown>] unexpected shape for input '{spec.name}' for "
                                        f"model '{where.model}'. Expected {dims_str(expected)}, got {dims_str(got)}. "
                                        f"{BATCH_NOTE if batched else ''}".rstrip())


def _quoted(names: list[str]) -> str:
    return "[" + ", ".join(f"'{name}'" for name in names) + "]"


def _warmup_file(model_dir: str, name: str, warm: WarmupInput, at: str, where: _Fields) -> bytes:
    path = model_file(model_dir, name, "warmup")
    if path is None:
        raise where.error(f"{at}.input_data_file", outside("warmup data", shown(name), where.model))
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as exc:  # (Triton's wording)
        raise where.error(f"{at}.input_data_file", f"failed to open text file for read {path}: {exc.strerror}"
                          ) from None
    if len(data) < warm.byte_size():  # (Triton's check and wording, its missing space included)
        raise where.error(f"{at}.input_data_file", f"[request id: <id_unknown>] warmup setting expects "
                                                   f"{warm.byte_size()} bytes, but the data provided from {name}only "
                                                   f"has {len(data)} bytes")
    return data
