"""A Python-backend model that is not decoupled may answer a request through its response sender, as Triton's Python
backend lets it: one response (the one its client gets), during `execute` or after it returned, with Triton's
refusals of a final flag before any response, of a second response, and of a send after the sender closed
(tests/repositories/pyfix/sender_once, whose CASE input chooses; Triton's qa/L0_backend_python/response_sender)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.paths import REPO
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, asked_of_real_tritonserver
from tests._support.serving import serve
from tests._support.waits import wait_for_file

REPOSITORY = REPO / "tests" / "repositories" / "pyfix"
FINAL_FIRST = "Unable to send response. Non-decoupled model cannot send complete final before sending a response."

# CASE -> what a gRPC client's infer gets from tritonserver 2.51: ("response", OUT) or ("error", the message's start)
CASES: dict[str, tuple[str, str]] = {
    "in_execute": ("response", "sent"),
    "from_thread": ("response", "sent"),
    "final_first": ("error", f"Failed to process the request(s) for model 'sender_once_0', message: "
                             f"TritonModelException: {FINAL_FIRST}"),
    # the first response, then execute's error (the second send raised): two responses, which tritonserver's infer
    # route refuses (its stream route hands on the first); here the request is answered with the first
    "twice": ("error", "expected a single response, got 2"),
    "sent_and_returned": ("response", "sent"),  # (the returned response is not sent: the sender was closed)
    "returned_then_sent": ("response", "returned"),
}
OURS = dict(CASES, twice=("response", "first"))


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPOSITORY)) as s:
        yield s


def _answer(grpc_url: str, case: str, parameters: dict[str, Any] | None = None) -> tuple[str, str]:
    client = grpcclient.InferenceServerClient(grpc_url)
    try:
        tensor = grpcclient.InferInput("CASE", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([case.encode()], dtype=np.object_))
        result = client.infer("sender_once", [tensor], parameters=parameters, client_timeout=60)
        return ("response", result.as_numpy("OUT")[0].decode())
    except InferenceServerException as exc:
        return ("error", exc.message())
    finally:
        client.close()


def _answers(grpc_url: str, scratch: Path) -> dict[str, tuple[str, str]]:
    """Each case's answer, as the client sees it; `returned_then_sent`'s with why the later send was refused."""
    got = {"later_send": ("not made", "")}
    for case in CASES:
        gate, record = scratch / f"{case}.gate", scratch / f"{case}.record"
        got[case] = _answer(grpc_url, case, {"gate": str(gate), "record": str(record)})
        if case == "returned_then_sent" and got[case][0] == "response":
            gate.touch()  # (the client has its answer: only now does the model's thread send)
            wait_for_file(record)
            got["later_send"] = ("refused", record.read_text())
    return got


def _expected(answers: dict[str, tuple[str, str]], table: dict[str, tuple[str, str]]) -> None:
    for case, (kind, text) in table.items():  # (Triton's error messages go on with the model file's traceback)
        assert answers[case][0] == kind and answers[case][1].startswith(text), (case, answers[case])
    assert answers["later_send"] == ("refused", "Unable to send response. Non-decoupled model cannot send more than "
                                                "one response."), answers["later_send"]


def test_a_request_is_answered_through_its_sender_as_on_triton(server, tmp_path):
    _expected(_answers(server.grpc_url, tmp_path), OURS)
    assert server.process.poll() is None


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_answers_the_same(tmp_path):
    repository = tmp_path / "models"
    shutil.copytree(REPOSITORY / "sender_once", repository / "sender_once")
    _expected(asked_of_real_tritonserver(repository, lambda http_url, grpc_url: _answers(grpc_url, tmp_path)), CASES)
