"""Triton model repositories (`--model-repository DIR`): each `<model>/config.pbtxt` with its version folders becomes a
model the server serves, its instances worker processes running the model's `model.py` (model control mode "none":
every model is loaded at start)."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence

from tritonclient.grpc import model_config_pb2 as pb

from pytriton.backends.python_model import python_model_target
from pytriton.core.gpus import visible_gpus
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.repository.config import (
    CONFIG_FILE,
    DEFAULT_MODEL_FILENAME,
    ModelRepositoryError,
    read_model_config,
    to_model_config,
    version_policy,
)


@dataclasses.dataclass(frozen=True)
class RepositoryModel:
    """One model version of a repository to serve: its configuration and its workers' target."""

    config: TritonModelConfig
    target: str  # python-backend:/abs/<repo>/<model>/<version>/<file>


def _versions(model_dir: str) -> list[int]:
    """The version folders of a model: subfolders named by an integer (Triton skips the others)."""
    found = []
    for entry in os.listdir(model_dir):
        if entry.isdigit() and os.path.isdir(os.path.join(model_dir, entry)):
            found.append(int(entry))
    return sorted(found)


def select_versions(policy: dict, available: list[int], path: str, model: str) -> list[int]:
    """The versions a version policy serves, of those present."""
    if "all" in policy:
        return available
    if "specific" in policy:
        wanted = policy["specific"]["versions"]
        missing = [v for v in wanted if v not in available]
        if missing:
            raise ModelRepositoryError(f"{path}: field 'version_policy' of model '{model}': version {missing[0]} is "
                                       f"listed but has no folder (versions found: {available})")
        return sorted(wanted)
    count = max(int(policy["latest"]["num_versions"]), 1)
    return available[-count:]


def load_versions(model_dir: str, override: pb.ModelConfig | None = None, served_name: str | None = None
                  ) -> list[RepositoryModel]:  # fmt: skip
    """The model versions in `model_dir` its version policy serves (`config.pbtxt` and the version folders), lowest
    first; a ModelRepositoryError names what is wrong.

    `override` replaces the model's `config.pbtxt` (a load request's `config` parameter); `served_name` is the name a
    repository's name mapping gives the folder (the configuration's name is replaced by it)."""
    model_dir = os.path.abspath(model_dir)
    name = served_name or os.path.basename(model_dir)
    path = os.path.join(model_dir, CONFIG_FILE)
    if override is not None:
        proto = override
        path = f"the configuration given to load model '{name}'"
    elif not os.path.isfile(path):
        raise ModelRepositoryError(f"model '{name}' in {os.path.dirname(model_dir)}: {CONFIG_FILE} is required "
                                   "(auto-complete is not supported yet)")
    else:
        proto = read_model_config(path)
    available = _versions(model_dir)
    if not available:
        raise ModelRepositoryError(f"model '{name}' in {os.path.dirname(model_dir)}: no version folder (e.g. "
                                   f"{name}/1/{proto.default_model_filename or DEFAULT_MODEL_FILENAME})")
    gpus = functools.cache(visible_gpus)
    models = []
    for version in select_versions(version_policy(proto), available, path, name):
        config = to_model_config(proto, path, model_dir, version, gpus, served_name)
        model_file = os.path.join(model_dir, str(version), config.default_model_filename)
        if not os.path.isfile(model_file):
            raise ModelRepositoryError(f"model '{name}' version {version}: no model file '{model_file}'")
        models.append(RepositoryModel(config, python_model_target(model_file)))
    return models


def load_model(model_dir: str, override: pb.ModelConfig | None = None) -> RepositoryModel:
    """The highest version of `model_dir` its version policy serves (see `load_versions`)."""
    return load_versions(model_dir, override)[-1]


def scan_repositories(folders: Sequence[str], mappings: Mapping[str, str] | None = None) -> dict[str, str]:
    """The model folders of the repositories `folders`, by model name; a model name found in two repositories is
    refused, as Triton does.

    `mappings` (model name -> model folder: repositories registered with a name mapping) serve those folders under
    the mapped names, not their own; a mapped name wins over a folder of that name, as in Triton."""
    mappings = mappings or {}
    mapped_dirs = {os.path.normpath(d) for d in mappings.values()}
    found: dict[str, str] = {}
    for folder in folders:
        if not os.path.isdir(folder):
            raise ModelRepositoryError(f"model repository '{folder}' is not a directory")
        for entry in sorted(os.listdir(folder)):
            model_dir = os.path.join(folder, entry)
            if entry.startswith(".") or not os.path.isdir(model_dir) or os.path.normpath(model_dir) in mapped_dirs:
                continue
            if entry in found:
                raise ModelRepositoryError(f"model '{entry}' appears in two model repositories: "
                                           f"'{os.path.dirname(found[entry])}' and '{folder}'")
            found[entry] = model_dir
    for name, model_dir in mappings.items():
        if os.path.isdir(model_dir):  # (Triton: a mapped folder that is gone cannot be loaded)
            found[name] = model_dir
    return found


def load_repositories(folders: Sequence[str]) -> list[RepositoryModel]:
    """Every model version of the repositories `folders` its policy selects (mode "none": all are served)."""
    return [model for model_dir in scan_repositories(folders).values() for model in load_versions(model_dir)]


__all__ = ["ModelRepositoryError", "RepositoryModel", "load_model", "load_repositories", "load_versions",
           "scan_repositories"]
