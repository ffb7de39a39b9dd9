"""Auto-complete of a repository model's configuration (Triton's default; off with `--disable-auto-complete-config` or
`--strict-model-config=true`): the model's `TritonPythonModel.auto_complete_config` completes what `config.pbtxt`
says, or the whole configuration when there is no `config.pbtxt`. It runs in a child process, never here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as pb

from pytriton.backends.child import reap
from pytriton.model_config.proto_json import int64_as_numbers
from pytriton.repository.config import DEFAULT_MODEL_FILENAME, ModelRepositoryError


def config_json(config: pb.ModelConfig) -> dict[str, Any]:
    """Triton's JSON form of a model configuration as a Python-backend model sees it: every plain field present
    (defaults too), enums by name, integers as numbers."""
    data: dict[str, Any]
    try:
        data = json_format.MessageToDict(config, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True)
    except TypeError:  # protobuf < 5.26
        data = json_format.MessageToDict(config, preserving_proto_field_name=True,
                                         including_default_value_fields=True)
    return int64_as_numbers(data, pb.ModelConfig.DESCRIPTOR)


def prefill(config: pb.ModelConfig, model_dir: str, versions: list[int]) -> pb.ModelConfig:
    """What Triton fills in before any backend's auto-complete: the name (the model's folder), and `backend: "python"`
    when neither backend nor platform is given and the model file is `model.py` or a version folder holds one."""
    config = pb.ModelConfig.FromString(config.SerializeToString())
    if not config.name:
        config.name = os.path.basename(os.path.normpath(model_dir))
    has_model_py = config.default_model_filename == DEFAULT_MODEL_FILENAME or any(
        os.path.isfile(os.path.join(model_dir, str(v), DEFAULT_MODEL_FILENAME)) for v in versions)
    if not config.backend and not config.platform and has_model_py:
        config.backend = "python"
    return config


def auto_complete(config: pb.ModelConfig, model_file: str) -> pb.ModelConfig:
    """`config` as the model's `auto_complete_config` completes it (unchanged when it has none); ModelRepositoryError
    naming the model and its file if it raises or returns something that is no configuration."""
    name = config.name
    with tempfile.TemporaryDirectory(prefix="pytriton-autocomplete-") as directory:
        config_path = os.path.join(directory, "config.json")
        answer_path = os.path.join(directory, "answer.json")
        with open(config_path, "w", encoding="utf-8") as f:
            json.dump(config_json(config), f)
        returncode = _run(model_file, config_path, answer_path)
        try:
            with open(answer_path, encoding="utf-8") as f:
                answer = json.load(f)
        except (OSError, ValueError):
            raise ModelRepositoryError(f"auto-complete of model '{name}': the process running its "
                                       f"auto_complete_config exited with code {returncode} before it answered "
                                       "(see the log)") from None
    if "error" in answer:
        trace = answer.get("traceback", "")
        raise ModelRepositoryError(f"auto_complete_config of model '{name}' ({model_file}) failed: {answer['error']}"
                                   + (f"\n{trace.rstrip()}" if trace else ""))
    completed = answer.get("config")
    if completed is None:
        return config
    try:
        result = json_format.ParseDict(completed, pb.ModelConfig())
    except (json_format.ParseError, TypeError, ValueError) as exc:
        raise ModelRepositoryError(f"auto_complete_config of model '{name}' ({model_file}) returned an invalid model "
                                   f"configuration: {exc}") from None
    if result.name != name:
        raise ModelRepositoryError(f"auto_complete_config of model '{name}' ({model_file}) changed the model's name "
                                   f"to '{result.name}'")
    return result


def _run(model_file: str, config_path: str, answer_path: str) -> int:
    """Run the auto-complete process to its end; it dies with this process (PR_SET_PDEATHSIG)."""
    process = subprocess.Popen([sys.executable, "-m", "pytriton.backends.autocomplete", model_file, config_path,
                                answer_path, str(os.getpid())])
    try:
        return process.wait()
    finally:
        reap(process)


__all__ = ["auto_complete", "config_json", "prefill"]
