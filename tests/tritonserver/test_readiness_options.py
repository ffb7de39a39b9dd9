"""The in-process Options exit_on_error, strict_readiness and server_id, as Triton's: a model that fails at start
fails `start()` unless exit_on_error=False, then `ready()` waits for every model unless strict_readiness=False."""

from __future__ import annotations

from pathlib import Path

import pytest

import pytriton.tritonserver as tritonserver

BROKEN = str(Path(__file__).resolve().parent.parent / "repositories" / "broken_init")


def test_exit_on_error_by_default():
    server = tritonserver.Server(model_repository=BROKEN, exit_timeout=5)
    with pytest.raises(tritonserver.InternalError, match="^failed to load all models$") as caught:
        server.start()  # Triton's error; the model and its reason are in the cause
    assert "weights file missing for init_fails" in str(caught.value.__cause__)
    server.stop()


@pytest.mark.parametrize("strict", [True, False])
def test_a_failed_model_and_strict_readiness(strict):
    server = tritonserver.Server(model_repository=BROKEN, exit_timeout=5, exit_on_error=False,
                                 strict_readiness=strict, server_id="inproc").start()
    try:
        assert server.live()
        assert server.ready() is (not strict)
        assert server.model("init_fails").ready() is False
        assert server.metadata()["name"] == "inproc"
        assert server.models()["init_fails", 1].state == "UNAVAILABLE"
    finally:
        server.stop()


def test_a_configuration_that_cannot_be_completed_is_left_out_without_exit_on_error(tmp_path):
    (tmp_path / "init_fails").symlink_to(Path(BROKEN) / "init_fails")
    (tmp_path / "ac_raises").symlink_to(Path(BROKEN).parent / "autocomplete_errors" / "ac_raises")
    with pytest.raises(tritonserver.InternalError, match="^failed to load all models$") as caught:
        tritonserver.Server(model_repository=str(tmp_path), exit_timeout=5).start()
    assert "auto_complete_config of model 'ac_raises'" in str(caught.value.__cause__)
    server = tritonserver.Server(model_repository=str(tmp_path), exit_timeout=5, exit_on_error=False).start()
    try:
        assert server.live() and not server.ready()
        assert server.model("ac_raises").ready() is False
        assert server.models()["ac_raises", 1].state == "UNAVAILABLE"
        assert server.models()["init_fails", 1].state == "UNAVAILABLE"
    finally:
        server.stop()
