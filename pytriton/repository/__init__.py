"""Triton model repositories (`--model-repository DIR`): each `<model>/config.pbtxt` with its version folders becomes a
model the server serves, its instances worker processes running the model's `model.py` (model control mode "none":
every model is loaded at start)."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence

from tritonclient.grpc import model_config_pb2 as pb

from pytriton.backends.python_model import python_model_target
from pytriton.core.ensemble import TARGET_PREFIX as ENSEMBLE_TARGET
from pytriton.core.ensemble import ensemble_steps
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


def load_model(model_dir: str, override: pb.ModelConfig | None = None) -> RepositoryModel:
    """The model in `model_dir` (`config.pbtxt` and a version folder), ModelRepositoryError naming what is wrong.

    `override` replaces the model's `config.pbtxt` (a load request's `config` parameter)."""
    model_dir = os.path.abspath(model_dir)
    name = os.path.basename(model_dir)
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
    versions = select_versions(version_policy(proto), available, path, name)
    if len(versions) != 1:
        raise ModelRepositoryError(
            f"{path}: field 'version_policy' of model '{name}': it selects versions {versions}; serving more than one "
            "version of a model is not supported yet (select one, e.g. version_policy: { latest: { num_versions: 1 "
            "} })")
    gpus = functools.cache(visible_gpus)
    config = to_model_config(proto, path, model_dir, versions[0], gpus)
    if config.ensemble_scheduling is not None:  # no model file: the server runs it (its version folder may be empty)
        return RepositoryModel(config, ENSEMBLE_TARGET + path)
    model_file = os.path.join(model_dir, str(versions[0]), config.default_model_filename)
    if not os.path.isfile(model_file):
        raise ModelRepositoryError(f"model '{name}' version {versions[0]}: no model file '{model_file}'")
    return RepositoryModel(config, python_model_target(model_file))


def scan_repositories(folders: Sequence[str]) -> dict[str, str]:
    """The model folders of the repositories `folders`, by model name; a model name found in two repositories is
    refused, as Triton does."""
    found: dict[str, str] = {}
    for folder in folders:
        if not os.path.isdir(folder):
            raise ModelRepositoryError(f"model repository '{folder}' is not a directory")
        for entry in sorted(os.listdir(folder)):
            model_dir = os.path.join(folder, entry)
            if entry.startswith(".") or not os.path.isdir(model_dir):
                continue
            if entry in found:
                raise ModelRepositoryError(f"model '{entry}' appears in two model repositories: "
                                           f"'{os.path.dirname(found[entry])}' and '{folder}'")
            found[entry] = model_dir
    return found


def load_repositories(folders: Sequence[str]) -> list[RepositoryModel]:
    """Every model of the repositories `folders` (mode "none": all are served), each ensemble after the models its
    steps name (so that it is checked against them as it loads)."""
    return serving_order([load_model(model_dir) for model_dir in scan_repositories(folders).values()])


def serving_order(models: list[RepositoryModel]) -> list[RepositoryModel]:
    """`models` with every ensemble after the models of its steps that are among them (a cycle keeps its order)."""
    by_name = {m.config.model_name: m for m in models}
    ordered: list[RepositoryModel] = []
    visiting: set[str] = set()

    def visit(model: RepositoryModel) -> None:
        name = model.config.model_name
        if model in ordered or name in visiting:
            return
        visiting.add(name)
        for step in ensemble_steps(model.config.ensemble_scheduling or {}):
            if step.model_name in by_name:
                visit(by_name[step.model_name])
        ordered.append(model)

    for model in models:
        visit(model)
    return ordered


__all__ = ["ModelRepositoryError", "RepositoryModel", "load_model", "load_repositories", "scan_repositories"]
