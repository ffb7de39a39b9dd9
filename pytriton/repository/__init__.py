"""Triton model repositories (`--model-repository DIR`): each `<model>/config.pbtxt` with its version folders becomes a
model the server serves, its instances worker processes running the model's `model.py` (model control mode "none":
every model is loaded at start)."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any

from tritonclient.grpc import model_config_pb2 as pb

from pytriton.backends.python_model import python_model_target
from pytriton.config.gpus import visible_gpus
from pytriton.core.ensemble import TARGET_PREFIX as ENSEMBLE_TARGET
from pytriton.core.ensemble import ensemble_steps
from pytriton.model_config.names import shown
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.repository.autocomplete import ForkServer
from pytriton.repository.autocomplete import auto_complete as complete_config
from pytriton.repository.autocomplete import prefill
from pytriton.repository.config import (
    CONFIG_FILE,
    DEFAULT_MODEL_FILENAME,
    ModelRepositoryError,
    read_model_config,
    to_model_config,
    version_policy,
)
from pytriton.repository.ensemble_config import is_ensemble
from pytriton.repository.files import model_file, outside
from pytriton.repository.folders import model_folders


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


def select_versions(policy: dict[str, Any], available: list[int], path: str, model: str) -> list[int]:
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


def python_based_backend(backend: str, backend_directory: str | None) -> str | None:
    """The `model.py` of a Python-based backend (Triton's: `<backend directory>/<backend>/model.py`, a
    `TritonPythonModel` every model naming the backend runs), or None when there is none."""
    if not backend or backend == "python" or not backend_directory or os.sep in backend or backend in (".", ".."):
        return None
    found = os.path.join(backend_directory, backend, DEFAULT_MODEL_FILENAME)
    return found if os.path.isfile(found) else None


def load_versions(model_dir: str, override: pb.ModelConfig | None = None, auto_complete: bool = True,
                  served_name: str | None = None, forks: ForkServer | None = None,
                  backend_directory: str | None = None) -> list[RepositoryModel]:
    """The model versions in `model_dir` its version policy serves (`config.pbtxt` and the version folders), lowest
    first; a ModelRepositoryError names what is wrong.

    `override` replaces the model's `config.pbtxt` (a load request's `config` parameter). With `auto_complete` (Triton's
    default) the model's `auto_complete_config` completes the configuration, which may then be partial or absent.
    `served_name` is the name a repository's name mapping gives the folder (the configuration's name is replaced by
    it, as in Triton). `forks` runs auto-complete in its forked children (else each in a fresh interpreter). A model
    whose backend is a Python-based backend of `backend_directory` runs that backend's model.py (its version folders
    hold what the backend reads, e.g. a model.json)."""
    model_dir = os.path.abspath(model_dir)
    name = served_name or os.path.basename(model_dir)
    path = os.path.join(model_dir, CONFIG_FILE)
    if override is not None:
        proto = override
        path = f"the configuration given to load model '{name}'"
    elif os.path.isfile(path):
        proto = read_model_config(path)
    elif auto_complete:
        proto = pb.ModelConfig()
        path = f"the configuration of model '{name}' (no {CONFIG_FILE}: completed by its auto_complete_config)"
    else:
        # Triton's wording; its configuration is required with auto-complete off
        raise ModelRepositoryError(f"Poll failed for model directory '{name}': failed to open text file for read "
                                   f"{path}: No such file or directory (a {CONFIG_FILE} is required when "
                                   "auto-complete is disabled: --disable-auto-complete-config, "
                                   "--strict-model-config=true)")
    available = _versions(model_dir)
    if not available:
        raise ModelRepositoryError(f"model '{name}' in {os.path.dirname(model_dir)}: no version folder (e.g. "
                                   f"{name}/1/{proto.default_model_filename or DEFAULT_MODEL_FILENAME})")
    proto = prefill(proto, model_dir, available)
    versions = select_versions(version_policy(proto), available, path, name)
    gpus = functools.cache(visible_gpus)
    if is_ensemble(proto) or proto.HasField("ensemble_scheduling"):
        # no model file: the server runs it (its version folders may be empty)
        return [RepositoryModel(to_model_config(proto, path, model_dir, version, gpus, served_name),
                                ENSEMBLE_TARGET + path)
                for version in versions]
    backend_file = python_based_backend(proto.backend, backend_directory)
    if backend_file is not None:
        if auto_complete and (served_name is not None or proto.name == name):
            proto = complete_config(proto, backend_file, forks)
        return [RepositoryModel(to_model_config(proto, path, model_dir, version, gpus, served_name, python_based=True),
                                python_model_target(backend_file, os.path.join(model_dir, str(version))))
                for version in versions]
    if proto.backend not in ("", "python"):  # (a backend that is not here: refused naming it, not for a model file)
        to_model_config(proto, path, model_dir, versions[0], gpus, served_name)
    model_files = {}
    filename = proto.default_model_filename or DEFAULT_MODEL_FILENAME
    for version in versions:
        found = model_file(model_dir, filename, str(version))
        if found is None:  # (checked before auto-complete imports it in a child, and before any worker runs it)
            raise ModelRepositoryError(f"{path}: field 'default_model_filename' of model '{name}': " + outside(
                "model", shown(filename), name, f" for version {version}"))
        if not os.path.isfile(found):
            raise ModelRepositoryError(f"model '{name}' version {version}: no model file '{found}'")
        model_files[version] = found
    if auto_complete and proto.backend == "python" and (served_name is not None or proto.name == name):
        # One configuration for every version: completed by the highest served version's model.
        proto = complete_config(proto, model_files[versions[-1]], forks)
    return [RepositoryModel(to_model_config(proto, path, model_dir, version, gpus, served_name),
                            python_model_target(model_files[version])) for version in versions]


def load_model(model_dir: str, override: pb.ModelConfig | None = None, auto_complete: bool = True) -> RepositoryModel:
    """The highest version of `model_dir` its version policy serves (see `load_versions`)."""
    return load_versions(model_dir, override, auto_complete)[-1]


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
        for entry in model_folders(folder):
            model_dir = os.path.join(folder, entry)
            if os.path.normpath(model_dir) in mapped_dirs:
                continue
            if entry in found:
                raise ModelRepositoryError(f"model '{entry}' appears in two model repositories: "
                                           f"'{os.path.dirname(found[entry])}' and '{folder}'")
            found[entry] = model_dir
    for name, model_dir in mappings.items():
        if os.path.isdir(model_dir):  # (Triton: a mapped folder that is gone cannot be loaded)
            found[name] = model_dir
    return found


def load_repositories(folders: Sequence[str], auto_complete: bool = True,
                      refused: dict[str, tuple[int | None, str]] | None = None,
                      backend_directory: str | None = None) -> list[RepositoryModel]:
    """Every model version of the repositories `folders` its policy selects (mode "none": all are served), each
    ensemble after the models its steps name (so that it is checked against them as it loads). The models'
    auto-complete runs in children of one fork-server.

    A model that cannot be served raises its ModelRepositoryError; with `refused` (Triton's `--exit-on-error false`)
    it is left out and put there instead: name -> (the version it would have served, None when its configuration
    cannot be read or it has no version folder; the reason), and the others are loaded."""
    models: list[RepositoryModel] = []
    with ForkServer() as forks:
        for name, model_dir in scan_repositories(folders).items():
            try:
                models += load_versions(model_dir, auto_complete=auto_complete, forks=forks,
                                        backend_directory=backend_directory)
            except ModelRepositoryError as exc:
                if refused is None:
                    raise
                refused[name] = (_refused_version(model_dir), str(exc))
    return serving_order(models)


def _refused_version(model_dir: str) -> int | None:
    """The version a refused model is shown with (its highest folder), as Triton shows a model that failed to load;
    None (Triton's bare entry, "poll failed") when its configuration cannot be read or it has no version folder."""
    path = os.path.join(model_dir, CONFIG_FILE)
    try:
        if os.path.isfile(path):
            read_model_config(path)
        available = _versions(model_dir)
    except (ModelRepositoryError, OSError):
        return None
    return available[-1] if available else None


def serving_order(models: list[RepositoryModel]) -> list[RepositoryModel]:
    """`models` with every ensemble after the models of its steps that are among them (a cycle keeps its order)."""
    by_name = {m.config.model_name: m for m in models}  # (the highest version: the one a step with version -1 runs)
    ordered: list[RepositoryModel] = []
    visiting: set[tuple[str, int]] = set()

    def visit(model: RepositoryModel) -> None:
        key = (model.config.model_name, model.config.model_version)
        if key in visiting:
            return
        visiting.add(key)
        for step in ensemble_steps(model.config.ensemble_scheduling or {}):
            if step.model_name in by_name:
                visit(by_name[step.model_name])
        ordered.append(model)

    for model in models:
        visit(model)
    return ordered


__all__ = ["ModelRepositoryError", "RepositoryModel", "load_model", "load_repositories", "load_versions",
           "python_based_backend", "scan_repositories", "serving_order"]
