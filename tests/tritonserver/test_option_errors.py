"""Errors of the in-process API at `Server.start()` and in `Server`/`Model` calls: Triton's class and wording.

Triton's `Options` passes each field to a pybind11 setter (core python/tritonserver/_api/_server.py), which raises
pybind11's TypeError for a value its C++ parameter cannot take; the server's start then refuses the repositories as
core's server.cc and local file system do, and a model that fails to load at start as "failed to load all models".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tritonserver

REPOSITORIES = Path(__file__).resolve().parent.parent / "repositories"
MODELS = str(REPOSITORIES / "models")
OPTIONS = "tritonserver._c.triton_bindings.TRITONSERVER_ServerOptions"
BINDINGS = "tritonserver._c.triton_bindings"


def _incompatible(setter: str, *kinds: str) -> str:
    """The start of pybind11's message for `setter(self, kinds...)` (its "Invoked with" line follows)."""
    signature = ", ".join([f"self: {OPTIONS}"] + [f"arg{i}: {k}" for i, k in enumerate(kinds)])
    return (f"{setter}(): incompatible function arguments. The following argument types are supported:\n"
            f"    1. ({signature}) -> None\n\nInvoked with: <{OPTIONS} object at 0x")


# (field, a value Triton's setter refuses, the setter, its parameter types)
WRONG_TYPES = [
    ("model_repository", 1, "set_model_repository_path", ["str"]),
    ("model_repository", [MODELS, None], "set_model_repository_path", ["str"]),
    ("server_id", 1, "set_server_id", ["str"]),
    ("model_control_mode", 2, "set_model_control_mode", [f"{BINDINGS}.TRITONSERVER_ModelControlMode"]),
    ("startup_models", [1], "set_startup_model", ["str"]),
    ("strict_model_config", "yes", "set_strict_model_config", ["bool"]),
    ("rate_limiter_mode", "OFF", "set_rate_limiter_mode", [f"{BINDINGS}.TRITONSERVER_RateLimitMode"]),
    ("rate_limiter_resources", [tritonserver.RateLimiterResource("r", -1, 0)], "add_rate_limiter_resource",
     ["str", "int", "int"]),
    ("pinned_memory_pool_size", -1, "set_pinned_memory_pool_byte_size", ["int"]),
    ("pinned_memory_pool_size", 1.5, "set_pinned_memory_pool_byte_size", ["int"]),
    ("cuda_memory_pool_sizes", {0: "big"}, "set_cuda_memory_pool_byte_size", ["int", "int"]),
    ("cache_directory", None, "set_cache_directory", ["str"]),
    ("min_supported_compute_capability", "7.0", "set_min_supported_compute_capability", ["float"]),
    ("exit_on_error", "no", "set_exit_on_error", ["bool"]),
    ("strict_readiness", [], "set_strict_readiness", ["bool"]),
    ("exit_timeout", 2.5, "set_exit_timeout", ["int"]),
    ("buffer_manager_thread_count", -1, "set_buffer_manager_thread_count", ["int"]),
    ("model_load_thread_count", "4", "set_model_load_thread_count", ["int"]),
    ("model_load_retry_count", None, "set_model_load_retry_count", ["int"]),
    ("model_namespacing", "on", "set_model_namespacing", ["bool"]),
    ("enable_peer_access", "on", "set_enable_peer_access", ["bool"]),
    ("log_file", 3, "set_log_file", ["str"]),
    ("log_info", "on", "set_log_info", ["bool"]),
    ("log_warn", "on", "set_log_warn", ["bool"]),
    ("log_error", "on", "set_log_error", ["bool"]),
    ("log_format", 1, "set_log_format", [f"{BINDINGS}.TRITONSERVER_LogFormat"]),
    ("log_verbose", 1.0, "set_log_verbose", ["int"]),
    ("metrics", "on", "set_metrics", ["bool"]),
    ("cpu_metrics", "on", "set_cpu_metrics", ["bool"]),
    ("gpu_metrics", "on", "set_gpu_metrics", ["bool"]),
    ("metrics_interval", -5, "set_metrics_interval", ["int"]),
    ("backend_directory", 7, "set_backend_directory", ["str"]),
    ("repo_agent_directory", 7, "set_repo_agent_directory", ["str"]),
    ("model_load_device_limits", [tritonserver.ModelLoadDeviceLimit(1, 0, 0.5)], "set_model_load_device_limit",
     [f"{BINDINGS}.TRITONSERVER_InstanceGroupKind", "int", "float"]),
    ("host_policies", {"gpu0": {"numa-node": 0}}, "set_host_policy", ["str", "str", "str"]),
    ("metrics_configuration", {"": {"summary_latencies": True}}, "set_metrics_config", ["str", "str", "str"]),
    ("backend_configuration", {"python": {"shm-default-byte-size": 1}}, "set_backend_config", ["str", "str", "str"]),
]  # fmt: skip


@pytest.mark.parametrize(("field", "value", "setter", "kinds"), WRONG_TYPES,
                         ids=[f"{w[0]}={w[1]!r}" for w in WRONG_TYPES])
def test_an_option_of_the_wrong_type_raises_pybinds_type_error(field, value, setter, kinds):
    options = {"model_repository": MODELS, field: value}
    with pytest.raises(TypeError) as caught:
        tritonserver.Server(**options).start()
    assert type(caught.value) is TypeError
    assert str(caught.value).startswith(_incompatible(setter, *kinds)), str(caught.value)


def test_the_issues_examples_and_their_invoked_with_line():
    with pytest.raises(TypeError, match=re.escape(_incompatible("set_model_repository_path", "str"))) as caught:
        tritonserver.Server(model_repository=1).start()
    assert str(caught.value).endswith(">, 1")
    with pytest.raises(TypeError, match=re.escape(_incompatible("set_server_id", "str"))) as caught:
        tritonserver.Server(model_repository=MODELS, server_id=1).start()
    assert str(caught.value).endswith(">, 1")


def test_values_pybind_converts_are_taken():
    # bool parameters take numbers and None; int ones take bools; float ones take ints; str ones take bytes
    options = tritonserver.Options(model_repository=MODELS, strict_model_config=0, exit_on_error=None,
                                   exit_timeout=True, min_supported_compute_capability=7, server_id=b"triton")
    from pytriton.tritonserver._option_checks import check_types

    check_types(options)


def test_a_log_verbose_that_cannot_be_compared_raises_pythons_type_error():
    with pytest.raises(TypeError, match="'>' not supported between instances of 'str' and 'int'"):
        tritonserver.Server(model_repository=MODELS, log_verbose="1").start()


def test_repository_errors_at_start(tmp_path):
    with pytest.raises(tritonserver.InvalidArgumentError, match=r"^Model repository must be specified\.$"):
        tritonserver.Server(model_repository=None).start()
    with pytest.raises(tritonserver.InvalidArgumentError, match="^--model-repository must be specified$"):
        tritonserver.Server().start()  # the default: an empty list
    missing = str(tmp_path / "nowhere")
    with pytest.raises(tritonserver.InternalError) as caught:
        tritonserver.Server(model_repository=missing).start()
    assert str(caught.value) == f"failed to stat file {missing}"
    relative = "no/such/folder"
    with pytest.raises(tritonserver.InternalError) as caught:
        tritonserver.Server(model_repository=[MODELS, relative]).start()
    assert str(caught.value) == f"failed to stat file {relative}"  # the path as given
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(tritonserver.InvalidArgumentError, match="^repository path is not a valid directory$"):
        tritonserver.Server(model_repository=str(a_file)).start()
    with pytest.raises(tritonserver.InvalidArgumentError, match="^--repoagent-directory can not be empty$"):
        tritonserver.Server(model_repository=MODELS, repo_agent_directory="").start()


CONFIG = """backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""
RAISING = """class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("boom")

    def execute(self, requests):
        return []
"""


@pytest.mark.parametrize("broken", ["configuration", "initialize"])
def test_a_model_that_fails_to_load_at_start(tmp_path, broken):
    model = tmp_path / "broken" / "1"
    model.mkdir(parents=True)
    bad_config = CONFIG.replace("data_type: TYPE_FP32 ", "", 1)  # an input without its data type
    (model.parent / "config.pbtxt").write_text(bad_config if broken == "configuration" else CONFIG)
    (model / "model.py").write_text(RAISING)
    with pytest.raises(tritonserver.InternalError) as caught:
        tritonserver.Server(model_repository=str(tmp_path), exit_timeout=5).start()
    assert str(caught.value) == "failed to load all models"
    assert "broken" in str(caught.value.__cause__)  # which model and why


def test_model_calls_with_a_name_or_version_of_the_wrong_type():
    server = tritonserver.Server(model_repository=MODELS, exit_timeout=5,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT).start()
    try:
        with pytest.raises(TypeError, match=re.escape("model_metadata(): incompatible function arguments")):
            server.model(1).metadata()
        with pytest.raises(TypeError, match=re.escape("model_is_ready(): incompatible function arguments")):
            server.model("add_sub", "1").ready()
        with pytest.raises(TypeError, match=re.escape("load_model(): incompatible function arguments")):
            server.load(1)
        with pytest.raises(AttributeError, match="'int' object has no attribute 'name'"):
            server.unload(1)  # Triton's unload takes a str or a Model, and reads `.name` of anything else
        with pytest.raises(TypeError, match=re.escape("unload_model(): incompatible function arguments")):
            server.unload(server.model(5))
        with pytest.raises(TypeError, match=re.escape("model_config(): incompatible function arguments")):
            server.model("add_sub").config(-1)
        with pytest.raises(TypeError, match=re.escape("register_model_repository(): incompatible function")):
            server.register_model_repository(1)
        with pytest.raises(TypeError, match=re.escape("unregister_model_repository(): incompatible function")):
            server.unregister_model_repository(None)
        with pytest.raises(TypeError, match=re.escape("formatted(): incompatible function arguments")):
            server.metrics(0)
    finally:
        server.stop()
