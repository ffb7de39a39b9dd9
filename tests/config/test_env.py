"""Environment variables are read in one place (pytriton/config/env.py) when a server configuration is built."""

from __future__ import annotations

import pytest

from pytriton.config import env as _env
from pytriton.config.server import ModelSpec, ServerConfig
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig


def test_each_server_variable_sets_its_field():
    config = ServerConfig.from_env(
        {"PYTRITON_EXIT_WITH_PARENT": "1", "PYTRITON_INLINE_MAX_BYTES": "0", "PYTRITON_PIPELINE_DEPTH": "4",
         "PYTRITON_GRPC_SERVER": " GRPCIO ", "PYTRITON_EVENT_LOOP": "AsyncIO"},
        models=[],
    )
    assert (config.exit_with_parent, config.inline_max_bytes, config.pipeline_depth, config.grpc_implementation,
            config.event_loop) == (True, 0, 4, "grpcio", "asyncio")


def test_without_variables_the_defaults_hold_and_explicit_fields_win():
    default = ServerConfig.from_env({}, models=[])
    assert default == ServerConfig(models=[])
    assert (default.exit_with_parent, default.pipeline_depth, default.grpc_implementation, default.event_loop) \
        == (False, 2, "h2", "auto")
    explicit = ServerConfig.from_env({"PYTRITON_EXIT_WITH_PARENT": "0", "PYTRITON_INLINE_MAX_BYTES": "10"},
                                     models=[], exit_with_parent=True)
    assert explicit.exit_with_parent and explicit.inline_max_bytes == 10


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("PYTRITON_INLINE_MAX_BYTES", "lots", "a non-negative integer"),
        ("PYTRITON_INLINE_MAX_BYTES", "-1", "a non-negative integer"),
        ("PYTRITON_PIPELINE_DEPTH", "0", "an integer >= 1"),
        ("PYTRITON_GRPC_SERVER", "nope", "one of h2, grpcio"),
        ("PYTRITON_EVENT_LOOP", "trio", "one of auto, uvloop, asyncio"),
        ("PYTRITON_OUTPUT_COPY_THREADS", "0", "an integer >= 1"),
        ("PYTRITON_OUTPUT_COPY_THREADS", "two", "an integer >= 1"),
    ],
)
def test_a_bad_value_names_the_variable(name, value, expected):
    with pytest.raises(ValueError) as raised:
        ServerConfig.from_env({name: value}, models=[])
    assert str(raised.value) == f"{name}={value!r}: expected {expected}"


def test_every_server_variable_names_a_config_field_and_is_documented():
    fields = set(ServerConfig.__dataclass_fields__)
    for variable in _env.SERVER_VARIABLES:
        assert variable.field in fields and variable.name.startswith("PYTRITON_") and variable.doc


def test_worker_variables_are_checked_and_name_their_reader():
    assert ServerConfig.from_env({"PYTRITON_OUTPUT_COPY_THREADS": "3"}, models=[]) == ServerConfig(models=[])
    from pytriton.proxy import bigcopy

    assert [v.name for v in _env.WORKER_VARIABLES] == [bigcopy.THREADS_VARIABLE]
    assert all(v.reader == "pytriton.proxy.bigcopy.copy_threads" and v.doc for v in _env.WORKER_VARIABLES)
    assert bigcopy.copy_threads({"PYTRITON_OUTPUT_COPY_THREADS": "3"}) == 3


def test_malloc_tuning_yields_to_the_user():
    assert _env.malloc_tunables({}) == _env.MALLOC_TUNABLES
    assert _env.malloc_tunables({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}) is None
    assert _env.malloc_tunables({"PYTRITON_NO_MALLOC_TUNING": "1"}) is None


def test_triton_config_variables():
    settings = _env.triton_config_settings({"PYTRITON_TRITON_CONFIG_GRPC_PORT": "9", "OTHER": "x"})
    assert settings == {"grpc_port": "9"}


def test_server_config_survives_json():
    config = TritonModelConfig(model_name="m", inputs=[TensorSpec("IN", "FP32", (-1,))],
                               outputs=[TensorSpec("OUT", "FP32", (-1,))], max_batch_size=4)
    original = ServerConfig.from_env({"PYTRITON_PIPELINE_DEPTH": "3"}, models=[ModelSpec(config, "a.b:c")],
                                     http_restricted_api=["statistics:k=v"], exit_timeout_s=7.5)
    assert ServerConfig.from_json(original.to_json()) == original
