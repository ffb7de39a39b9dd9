"""What Triton's in-process API refuses in `Options` before a server exists, in Triton's order and words.

Triton's `Options` hands each field to a pybind11 setter of `TRITONSERVER_ServerOptions` (core
python/tritonserver/_api/_server.py, in the order of `check_types` below): a value its C++ parameter cannot take
raises pybind11's `TypeError`, naming the setter. Then the server's start checks the repositories (core src/server.cc
and the local file system): no repository is `InvalidArgumentError`, a path that cannot be stat'ed `InternalError`
"failed to stat file <path>", a path that is not a folder `InvalidArgumentError`.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence
from typing import Any

from pytriton.tritonserver._enums import InstanceGroupKind, LogFormat, ModelControlMode, RateLimitMode
from pytriton.tritonserver._errors import InternalError, InvalidArgumentError
from pytriton.tritonserver._options import Options
from pytriton.tritonserver._pybind import check_method

Kind = str | type[enum.Enum]


def _setter(setter: str, kinds: Sequence[Kind], *args: Any) -> None:
    """Refuse `args` as pybind11 refuses them for `TRITONSERVER_ServerOptions.<setter>(kinds...)`."""
    check_method("TRITONSERVER_ServerOptions", setter, kinds, "None", *args)


def repository_list(options: Options) -> list[Any]:
    """The repositories as Triton reads the field: None is refused, one value is a list of one."""
    if options.model_repository is None:
        raise InvalidArgumentError("Model repository must be specified.")
    paths = options.model_repository
    return list(paths) if isinstance(paths, list) else [paths]


def check_types(options: Options) -> None:
    """Every field through the type check of its Triton setter, in Triton's order; TypeError (or the error Python
    itself raises, e.g. iterating a number) at the first refused one."""
    _setter("set_server_id", ["str"], options.server_id)
    for path in repository_list(options):
        # (os.PathLike is taken too: a pathlib.Path names a folder as well as its str does)
        _setter("set_model_repository_path", ["str"], os.fspath(path) if isinstance(path, os.PathLike) else path)
    _setter("set_model_control_mode", [ModelControlMode], options.model_control_mode)
    for model in options.startup_models:
        _setter("set_startup_model", ["str"], model)
    _setter("set_strict_model_config", ["bool"], options.strict_model_config)
    _setter("set_rate_limiter_mode", [RateLimitMode], options.rate_limiter_mode)
    for resource in options.rate_limiter_resources:
        _setter("add_rate_limiter_resource", ["str", "uint", "int"], resource.name, resource.count,
                resource.device)
    _setter("set_pinned_memory_pool_byte_size", ["uint"], options.pinned_memory_pool_size)
    for device, size in options.cuda_memory_pool_sizes.items():
        _setter("set_cuda_memory_pool_byte_size", ["int", "uint"], device, size)
    _setter("set_cache_directory", ["str"], options.cache_directory)
    _setter("set_min_supported_compute_capability", ["float"], options.min_supported_compute_capability)
    _setter("set_exit_on_error", ["bool"], options.exit_on_error)
    _setter("set_strict_readiness", ["bool"], options.strict_readiness)
    _setter("set_exit_timeout", ["uint"], options.exit_timeout)
    _setter("set_buffer_manager_thread_count", ["uint"], options.buffer_manager_thread_count)
    _setter("set_model_load_thread_count", ["uint"], options.model_load_thread_count)
    _setter("set_model_load_retry_count", ["uint"], options.model_load_retry_count)
    _setter("set_model_namespacing", ["bool"], options.model_namespacing)
    _setter("set_enable_peer_access", ["bool"], options.enable_peer_access)
    if options.log_file:
        _setter("set_log_file", ["str"], options.log_file)
    options.log_verbose > 0  # noqa: B015 - Triton compares it (cascading the levels): a str or None raises here
    _setter("set_log_info", ["bool"], options.log_info)
    _setter("set_log_warn", ["bool"], options.log_warn)
    _setter("set_log_error", ["bool"], options.log_error)
    _setter("set_log_format", [LogFormat], options.log_format)
    _setter("set_log_verbose", ["int"], options.log_verbose)
    _setter("set_metrics", ["bool"], options.metrics)
    _setter("set_cpu_metrics", ["bool"], options.cpu_metrics)
    _setter("set_gpu_metrics", ["bool"], options.gpu_metrics)
    _setter("set_metrics_interval", ["uint"], options.metrics_interval)
    _setter("set_backend_directory", ["str"], options.backend_directory)
    _setter("set_repo_agent_directory", ["str"], options.repo_agent_directory)
    for limit in options.model_load_device_limits:
        _setter("set_model_load_device_limit", [InstanceGroupKind, "int", "float"], limit.kind, limit.device,
                limit.fraction)
    for setter, table in (("set_host_policy", options.host_policies),
                          ("set_metrics_config", options.metrics_configuration),
                          ("set_backend_config", options.backend_configuration)):  # fmt: skip
        for group, settings in table.items():
            for name, value in settings.items():
                _setter(setter, ["str", "str", "str"], group, name, value)


def check_repositories(options: Options) -> list[str]:
    """The repository folders, each checked as Triton's server start checks them; their absolute paths."""
    paths = [os.fspath(p) for p in repository_list(options)]
    if not paths:
        raise InvalidArgumentError("--model-repository must be specified")
    if not options.repo_agent_directory:
        raise InvalidArgumentError("--repoagent-directory can not be empty")
    for path in paths:
        try:
            is_folder = os.path.isdir(path) if os.stat(path) else False
        except (OSError, ValueError):
            raise InternalError(f"failed to stat file {path}") from None
        if not is_folder:
            raise InvalidArgumentError("repository path is not a valid directory")
    return [os.path.abspath(p) for p in paths]


__all__ = ["check_repositories", "check_types", "repository_list"]
