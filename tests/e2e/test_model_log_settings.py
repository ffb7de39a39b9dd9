"""A model's pb_utils.Logger lines follow the server's logging settings as a client changes them (Triton's logging
extension: HTTP POST /v2/logging, gRPC LogSettings), as on tritonserver 2.51 (its qa/L0_backend_python/logging):
INFO lines while log_info is on, WARNING while log_warning, ERROR while log_error, VERBOSE once log_verbose_level is 1
or more, in the workers already running."""

from __future__ import annotations

import numpy as np
import pytest

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve

LEVELS = ("info", "warning", "error", "verbose")


@pytest.fixture()
def server():
    with serve("--model-repository", str(REPO / "tests" / "repositories" / "model_log")) as s:
        yield s


def _log_lines(server, protocol: str, tag: str) -> None:
    lib = CLIENTS[protocol]
    tensor = lib.InferInput("TAG", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([tag.encode()], dtype=np.object_))
    client_for(server, protocol).infer("each_level", [tensor])


def _shown(server, tag: str) -> list[str]:
    return [level for level in LEVELS if f"{tag} {level}\n" in server.log]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_models_log_lines_follow_the_settings_a_client_sets(server, protocol):
    client = client_for(server, protocol)
    _log_lines(server, protocol, "first")
    assert server.wait_for_log("first error")
    assert _shown(server, "first") == ["info", "warning", "error"]  # (--log-level info: no verbose lines)

    client.update_log_settings({"log_verbose_level": 1})
    _log_lines(server, protocol, "verbose-on")
    assert server.wait_for_log("verbose-on verbose")
    assert _shown(server, "verbose-on") == ["info", "warning", "error", "verbose"]

    client.update_log_settings({"log_info": False, "log_warning": False, "log_error": False, "log_verbose_level": 0})
    _log_lines(server, protocol, "all-off")
    client.update_log_settings({"log_error": True})
    _log_lines(server, protocol, "errors-on")
    assert server.wait_for_log("errors-on error")  # (written after all-off's lines would have been)
    assert (_shown(server, "all-off"), _shown(server, "errors-on")) == ([], ["error"])
