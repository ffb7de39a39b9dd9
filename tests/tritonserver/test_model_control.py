"""The seed's model control examples: EXPLICIT (startup_models, load with a config override and files, unload,
register/unregister a repository with name_mapping) and POLL (poll_model_repository); Options warnings."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy
import pytest

import pytriton.tritonserver as tritonserver
from pytriton.tritonserver import _options

REPOSITORIES = Path(__file__).resolve().parent.parent / "repositories"
MODELS = str(REPOSITORIES / "models")


def test_explicit_mode_load_unload_and_repositories():
    options = tritonserver.Options()
    options.model_control_mode = tritonserver.ModelControlMode.EXPLICIT
    options.model_repository = MODELS
    options.startup_models = ["text_upper"]
    options.exit_timeout = 5
    options.allow_model_upload = True  # (the load of "uploaded" below gives the model's files)
    server = tritonserver.Server(options).start(wait_until_ready=True, timeout=60)
    try:
        models = server.models()
        assert models["text_upper", 1].state == "READY"
        assert ("add_sub", -1) in models and models["add_sub", -1].state is None  # known, not loaded
        assert set(server.models(exclude_not_ready=True)) == {("text_upper", 1)}

        model = server.load("add_sub")
        assert str(model) == "{'name': 'add_sub', 'version': -1, 'state': None}"
        assert server.models()["add_sub", 1].state == "READY"

        # a config override and the model's files as parameters: a model of a new name
        config = {"name": "uploaded", "backend": "python", "max_batch_size": 0,
                  "input": [{"name": "TEXT", "data_type": "TYPE_STRING", "dims": [-1]}],
                  "output": [{"name": "UPPER", "data_type": "TYPE_STRING", "dims": [-1]}]}
        source = (REPOSITORIES / "models" / "text_upper" / "1" / "model.py").read_bytes()
        server.load("uploaded", {"config": json.dumps(config), "file:1/model.py": source})
        response = next(iter(server.model("uploaded").infer(inputs={"TEXT": numpy.array([b"up"], dtype=object)})))
        assert list(response.outputs["UPPER"].to_bytes_array()) == [b"UP"]

        server.unload("add_sub", wait_until_unloaded=True, timeout=30)
        assert server.models()["add_sub", 1].state == "UNAVAILABLE"
        assert server.model("add_sub").ready() is False

        with pytest.raises(tritonserver.TritonError, match="failed to load 'nope'"):
            server.load("nope")

        assert ("repeat_int", -1) in server.models()
        server.unregister_model_repository(MODELS)
        assert ("repeat_int", -1) not in server.models()  # models loaded from it stay listed, as in Triton
        with pytest.raises(tritonserver.InvalidArgumentError, match="repository not found"):
            server.unregister_model_repository(MODELS)
        server.register_model_repository(MODELS, {"versioned": "renamed"})
        models = server.models()
        assert ("renamed", -1) in models and ("versioned", -1) not in models
        with pytest.raises(tritonserver.AlreadyExistsError, match="has already been registered"):
            server.register_model_repository(MODELS)
        with pytest.raises(tritonserver.UnsupportedError):
            server.poll_model_repository()
    finally:
        server.stop()


def test_a_mapped_model_is_served_under_its_mapped_name():
    """Triton replaces the config.pbtxt name of a mapped model folder with the mapped name (a folder's own name must
    match its config otherwise); the folder is not offered under its own name any more."""
    server = tritonserver.Server(model_repository=str(REPOSITORIES / "inprocess"), exit_timeout=5,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT).start(wait_until_ready=True)
    try:
        with pytest.raises(tritonserver.InvalidArgumentError, match="Mapped model name must be a string"):
            server.register_model_repository(MODELS, {"versioned": 3})
        server.register_model_repository(MODELS, {"versioned": "renamed", "text_upper": "shout"})
        models = server.models()
        assert {("renamed", -1), ("shout", -1), ("add_sub", -1)} <= set(models)
        assert ("versioned", -1) not in models and ("text_upper", -1) not in models
        with pytest.raises(tritonserver.TritonError, match="failed to load 'versioned'"):
            server.load("versioned")

        renamed = server.load("renamed")
        assert renamed.ready() and server.models()["renamed", 2].state == "READY"
        assert renamed.config()["name"] == "renamed" and renamed.metadata()["name"] == "renamed"
        response = next(iter(renamed.infer(inputs={"X": numpy.array([1], numpy.int32)})))
        assert response.model.name == "renamed"
        assert numpy.from_dlpack(response.outputs["VERSION"]).tolist() == [2]
        shout = server.load("shout")
        response = next(iter(shout.infer(inputs={"TEXT": numpy.array([b"hey"], dtype=object)})))
        assert list(response.outputs["UPPER"].to_bytes_array()) == [b"HEY"]

        with pytest.raises(tritonserver.AlreadyExistsError, match="conflicting mapping for 'renamed'"):
            server.register_model_repository(str(REPOSITORIES / "versions"), {"anything": "renamed"})
        server.unregister_model_repository(MODELS)
        assert ("add_sub", -1) not in server.models()
        server.register_model_repository(MODELS)  # its mappings went with it: the folders have their own names again
        assert ("versioned", -1) in server.models() and ("shout", 1) in server.models()  # (loaded: listed still)
        assert server.load("versioned").config()["name"] == "versioned"
    finally:
        server.stop()


def test_uploads_need_the_option_and_a_config_names_no_file_outside_the_model(tmp_path):
    """Files in a load's parameters are refused unless Options.allow_model_upload; a config override's label file
    (or model file) outside the model's folder is refused in the in-process API as over the network."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0\n")
    server = tritonserver.Server(model_repository=MODELS, exit_timeout=5,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT).start()
    try:
        config = {"name": "uploaded", "backend": "python", "max_batch_size": 0,
                  "input": [{"name": "TEXT", "data_type": "TYPE_STRING", "dims": [-1]}],
                  "output": [{"name": "UPPER", "data_type": "TYPE_STRING", "dims": [-1]}]}
        source = (REPOSITORIES / "models" / "text_upper" / "1" / "model.py").read_bytes()
        with pytest.raises(tritonserver.UnsupportedError, match="allow_model_upload"):
            server.load("uploaded", {"config": json.dumps(config), "file:1/model.py": source})
        assert ("uploaded", -1) not in server.models()
        config["name"] = "text_upper"
        config["output"][0]["label_filename"] = str(secret)
        with pytest.raises(tritonserver.InvalidArgumentError, match="outside model directory"):
            server.load("text_upper", {"config": json.dumps(config)})
    finally:
        server.stop()


def test_poll_mode_loads_what_the_repository_holds_when_polled(tmp_path):
    repository = tmp_path / "repo"
    repository.mkdir()
    shutil.copytree(REPOSITORIES / "models" / "text_upper", repository / "text_upper")
    server = tritonserver.Server(model_repository=str(repository), exit_timeout=5,
                                 model_control_mode=tritonserver.ModelControlMode.POLL).start(wait_until_ready=True)
    try:
        assert set(server.models()) == {("text_upper", 1)}
        shutil.copytree(REPOSITORIES / "models" / "versioned", repository / "versioned")
        assert ("versioned", 2) not in server.models()  # nothing happens until polled
        server.poll_model_repository()
        assert server.models()["versioned", 2].state == "READY"
        with pytest.raises(tritonserver.UnavailableError, match="explicit model load / unload is not allowed"):
            server.load("versioned")
    finally:
        server.stop()


def test_options_validated_at_start():
    with pytest.raises(tritonserver.InvalidArgumentError, match="--model-repository must be specified"):
        tritonserver.Server().start()
    with pytest.raises(tritonserver.InternalError, match="failed to stat file /nonexistent/models"):
        tritonserver.Server(model_repository="/nonexistent/models").start()


def test_inert_options_are_warned_about_once(monkeypatch):
    monkeypatch.setattr(_options, "_warned", set())
    options = tritonserver.Options(model_repository=MODELS, rate_limiter_mode=tritonserver.RateLimitMode.EXEC_COUNT,
                                   cache_directory="/opt/caches")
    with pytest.warns(UserWarning) as record:
        _options.warn_inert(options)
    assert sorted(str(w.message).split(":")[0] for w in record) == [
        "tritonserver.Options.cache_directory is accepted but has no effect",
        "tritonserver.Options.rate_limiter_mode is accepted but has no effect"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _options.warn_inert(options)  # once per process


def test_log_options_set_the_level_and_format():
    assert _options.log_level(tritonserver.Options()) > 50  # nothing shown
    assert _options.log_level(tritonserver.Options(log_warn=True)) == 30
    assert _options.log_level(tritonserver.Options(log_verbose=1)) == 10
    import logging

    record = logging.LogRecord("pytriton.core", logging.INFO, "/x/core.py", 12, "hello", None, None)
    line = _options.TritonLogFormatter(tritonserver.LogFormat.DEFAULT).format(record)
    assert line.startswith("I") and line.endswith("core.py:12] hello")
    iso = _options.TritonLogFormatter(tritonserver.LogFormat.ISO8601).format(record)
    assert iso[4] == "-" and " I " in iso


def test_the_response_cache_of_cache_config():
    options = tritonserver.Options(model_repository=str(REPOSITORIES / "cache"), exit_timeout=5,
                                   cache_config={"local": {"size": 1 << 20}})
    server = tritonserver.Server(options).start(wait_until_ready=True, timeout=60)
    try:
        model = server.model("counted")
        calls = [int(numpy.from_dlpack(r.outputs["CALLS"])[0])
                 for _ in range(3) for r in model.infer(inputs={"X": numpy.array([1, 2], numpy.float32)})]
        assert calls == [1, 1, 1]  # computed once, then answered from the cache
        stats = model.statistics()["model_stats"][0]["inference_stats"]
        assert (stats["cache_hit"]["count"], stats["cache_miss"]["count"]) == (2, 1)
    finally:
        server.stop()
    with pytest.raises(tritonserver.InvalidArgumentError, match="unknown cache 'redis'"):
        tritonserver.Server(tritonserver.Options(model_repository=MODELS, cache_config={"redis": {"host": "x"}})).start()


# Triton 2.51's model control errors (core r24.10: model_repository_manager.cc `Create` for the startup models and
# `LoadUnloadModel`; model names as core's ValidateModelName checks them, added after 2.51).
WILDCARD_ONLY = "Wildcard model name '*' must be the ONLY startup model if specified at all."


def explicit(**options) -> tritonserver.Server:
    return tritonserver.Server(model_repository=MODELS, exit_timeout=5,
                               model_control_mode=tritonserver.ModelControlMode.EXPLICIT, **options)


def test_the_wildcard_must_be_the_only_startup_model():
    with pytest.raises(tritonserver.InvalidArgumentError) as info:
        explicit(startup_models=["*", "text_upper"]).start(wait_until_ready=True, timeout=60)
    assert str(info.value) == WILDCARD_ONLY


def test_a_startup_model_not_in_the_repository_fails_the_start_as_in_triton():
    with pytest.raises(tritonserver.InternalError) as info:
        explicit(startup_models=["nope", "text_upper"]).start(wait_until_ready=True, timeout=60)
    assert str(info.value) == "failed to load all models"  # Triton's words; which model and why in the cause
    assert "failed to poll model 'nope': model not found in any model repository." in str(info.value.__cause__)
    server = explicit(startup_models=["nope", "text_upper"], exit_on_error=False).start(wait_until_ready=True,
                                                                                         timeout=60)
    try:  # (without exit_on_error: the others are loaded, the server runs)
        assert set(server.models(exclude_not_ready=True)) == {("text_upper", 1)}
    finally:
        server.stop()


def test_load_errors_have_triton_s_class_and_words():
    server = explicit().start(wait_until_ready=True, timeout=60)
    try:
        with pytest.raises(tritonserver.InternalError) as info:
            server.load("nope")
        assert str(info.value) == "failed to load 'nope', failed to poll from model repository"
        with pytest.raises(tritonserver.InvalidArgumentError) as info:
            server.load("..")
        assert str(info.value) == "invalid model name '..', model name must not contain path traversal characters"
        for blank in ("  ", "\n\t"):
            with pytest.raises(tritonserver.InvalidArgumentError) as info:
                server.load(blank)
            assert str(info.value) == "Model name cannot be empty. Please enter a valid name to deploy."
    finally:
        server.stop()
