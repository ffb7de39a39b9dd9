"""Request rescheduling and iterative sequences (`sequence_batching { iterative_sequence: true }`), as Triton 2.51
serves them, through tritonclient's gRPC stream against `pytriton serve --model-repository`.

The model (tests/repositories/rescheduling/iterative_countdown) counts each request down one step per execution and
asks for the request again (TRITONSERVER_REQUEST_RELEASE_RESCHEDULE) until it reaches 0; each response says which
execution it came from, the correlation id and flags the model saw and the execution's batch size. TRITON_2_51 below is
what the real tritonserver 2.51 (the one nvidia-pytriton 0.7.0 bundles) answered to the same calls (`calls`); run
`test_the_same_calls_answer_as_on_the_real_tritonserver` with it installed (tests/_support/real_tritonserver.py) to
see it again.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.paths import REPO
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, real_tritonserver
from tests._support.serving import serve

MODELS = REPO / "tests" / "repositories" / "rescheduling"
REFUSED = ("Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured to "
           "handle such a flag.")

# The batched variant waits for its slots to fill (or 0.3 s) before a batch starts: the first batch holds the three
# requests of one burst on both servers, whatever the timing.
BATCHED = """
max_batch_size: 4
sequence_batching {
  iterative_sequence: true
  direct { max_queue_delay_microseconds: 300000 minimum_slot_utilization: 1.0 }
}
"""


def stage(root: Path) -> Path:
    """The repository: the countdown (decoupled, unbatched), its batched and non-decoupled variants, and the model
    that reschedules without an iterative sequence."""
    shutil.copytree(MODELS / "iterative_countdown", root / "countdown")
    shutil.copytree(MODELS / "reschedule_refused", root / "reschedule_refused")
    config = (MODELS / "iterative_countdown" / "config.pbtxt").read_text().replace("iterative_countdown", "countdown")
    for name, text in (
        ("countdown_batched", config.replace("max_batch_size: 0", "").replace(
            "sequence_batching { iterative_sequence: true }", BATCHED)),
        ("countdown_unary", config.replace("model_transaction_policy { decoupled: true }", "")),
    ):
        shutil.copytree(MODELS / "iterative_countdown", root / name)
        (root / name / "config.pbtxt").write_text(text.replace('name: "countdown"', f'name: "{name}"'))
    (root / "countdown" / "config.pbtxt").write_text(config)
    return root


def _row(result: Any) -> list[Any]:
    response = result.get_response()
    final = response.parameters["triton_final_response"].bool_param
    if result.as_numpy("OUT") is None:
        return [response.id, "empty", final]
    return [response.id] + [int(result.as_numpy(name).reshape(-1)[0])
                            for name in ("OUT", "EXEC", "CORRID", "FLAGS", "BATCH")] + [final]


def stream(url: str, model: str, values: list[int], ids: list[int] | None = None) -> list[Any]:
    """Send one request per value on one gRPC stream (request ids r0, r1, ...; with `ids`, each its own sequence
    flagged START); the rows of every response until each request's final one, in the order they came."""
    got: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(url)
    client.start_stream(callback=lambda result, error: got.put(error if error else result))
    try:
        for index, value in enumerate(values):
            tensor = grpcclient.InferInput("IN", [1, 1] if model.endswith("batched") else [1], "INT32")
            tensor.set_data_from_numpy(np.array([value], np.int32).reshape(tensor.shape()))
            sequence = {"sequence_id": ids[index], "sequence_start": True} if ids else {}
            client.async_stream_infer(model, [tensor], request_id=f"r{index}", enable_empty_final_response=True,
                                      **sequence)
        rows: list[Any] = []
        finals = 0
        while finals < len(values):
            item = got.get(timeout=30)
            if isinstance(item, InferenceServerException):
                rows.append(f"{item.status()} {item.message()}")
                finals += 1
                continue
            rows.append(_row(item))
            finals += rows[-1][-1]
        return rows
    finally:
        client.stop_stream()
        client.close()


def calls(url: str) -> dict[str, Any]:
    """The calls both servers answer, in this order (the execution numbers and correlation ids run on across them)."""
    out: dict[str, Any] = {
        "one request": stream(url, "countdown", [3]),
        # (one instance, one slot: each sequence holds it until its request ends; the next ones wait)
        "three requests": stream(url, "countdown", [2, 3, 1]),
        "given ids": stream(url, "countdown", [2, 2], ids=[7, 9]),
        "batched": stream(url, "countdown_batched", [2, 3, 1]),
    }
    with grpcclient.InferenceServerClient(url) as client:
        tensor = grpcclient.InferInput("IN", [1], "INT32")
        tensor.set_data_from_numpy(np.array([3], np.int32))
        result = client.infer("countdown_unary", [tensor], request_id="u")
        out["unary"] = [int(result.as_numpy(name)[0]) for name in ("OUT", "EXEC", "CORRID", "FLAGS", "BATCH")]
    return out


# What tritonserver 2.51 answered to `calls` (rows: request id, OUT, EXEC, CORRID, FLAGS, BATCH, final)
TRITON_2_51 = {
    "one request": [["r0", 2, 1, 1, 1, 1, False], ["r0", 1, 2, 1, 0, 1, False], ["r0", 0, 3, 1, 0, 1, True]],
    "three requests": [["r0", 1, 4, 2, 1, 1, False], ["r0", 0, 5, 2, 0, 1, True],
                       ["r1", 2, 6, 3, 1, 1, False], ["r1", 1, 7, 3, 0, 1, False], ["r1", 0, 8, 3, 0, 1, True],
                       ["r2", 0, 9, 4, 1, 1, True]],
    "given ids": [["r0", 1, 10, 7, 1, 1, False], ["r0", 0, 11, 7, 0, 1, True],
                  ["r1", 1, 12, 9, 1, 1, False], ["r1", 0, 13, 9, 0, 1, True]],
    # (its third execution: r1 in slot 1 and a not-ready request in the empty slot 0, as the Direct batcher fills)
    "batched": [["r0", 1, 1, 1, 1, 3, False], ["r1", 2, 1, 2, 1, 3, False], ["r2", 0, 1, 3, 1, 3, True],
                ["r0", 0, 2, 1, 0, 2, True], ["r1", 1, 2, 2, 0, 2, False], ["r1", 0, 3, 2, 0, 2, True]],
    "unary": [0, 3, 1, 0, 1],
}


def test_iterative_sequences_run_each_rescheduled_request_again_as_triton_does(tmp_path):
    with serve("--model-repository", str(stage(tmp_path / "repo"))) as server:
        assert calls(server.grpc_url) == TRITON_2_51


def test_rescheduling_without_an_iterative_sequence_fails_the_request_in_tritons_words(tmp_path):
    """Triton logs these words and releases the request unanswered (its client waits until its own deadline); here
    the client gets them, INVALID_ARGUMENT, and the model serves on."""
    with serve("--model-repository", str(stage(tmp_path / "repo"))) as server:
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            tensor = grpcclient.InferInput("IN", [1], "INT32")
            tensor.set_data_from_numpy(np.array([1], np.int32))
            for _ in range(2):
                with pytest.raises(InferenceServerException) as caught:
                    client.infer("reschedule_refused", [tensor], client_timeout=30)
                assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
                assert caught.value.message() == REFUSED
            assert stream(server.grpc_url, "countdown", [2])[-1] == ["r0", 0, 2, 1, 0, 1, True]
        assert REFUSED in server.log


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_same_calls_answer_as_on_the_real_tritonserver(tmp_path):
    repository = stage(tmp_path / "repo")
    with real_tritonserver(repository, tmp_path) as url:
        theirs = calls(url)
    with serve("--model-repository", str(repository)) as server:
        ours = calls(server.grpc_url)
    print("tritonserver 2.51:", theirs)
    assert theirs == TRITON_2_51
    assert ours == theirs


# Triton's own rescheduling tests (qa/L0_backend_python/request_rescheduling): their models, staged as its test.sh
# stages them, from a checkout of Triton's server repository (never copied here)
QA_CHECKOUT = os.environ.get("PYTRITON_TRITON_SERVER_SRC", "")
QA_MODELS = ("bls_request_rescheduling", "request_rescheduling_addsub", "iterative_sequence", "wrong_return_type")


def stage_qa(checkout: Path, dest: Path) -> Path:
    for name in QA_MODELS:
        source = checkout / "qa" / "python_models" / name
        (dest / name / "1").mkdir(parents=True)
        shutil.copyfile(source / "model.py", dest / name / "1" / "model.py")
        shutil.copyfile(source / "config.pbtxt", dest / name / "config.pbtxt")
    return dest


@pytest.mark.slow
@pytest.mark.skipif(not QA_CHECKOUT, reason="PYTRITON_TRITON_SERVER_SRC names no checkout of Triton's server repository")
def test_tritons_own_rescheduling_tests_pass(tmp_path):
    """grpc_endpoint_test.py's two tests, then test_infer_shm_leak.py's call of `bls_request_rescheduling`, whose
    model runs Triton's unittest through BLS (wrong return type, non-decoupled and decoupled rescheduling, each model
    reloaded first) and reports it."""
    repository = stage_qa(Path(QA_CHECKOUT), tmp_path / "models")
    with serve("--model-repository", str(repository), "--model-control-mode", "explicit",
               "--load-model", "*") as server, grpcclient.InferenceServerClient(server.grpc_url) as client:
        client.unload_model("iterative_sequence")
        client.load_model("iterative_sequence")
        got: queue.Queue[Any] = queue.Queue()
        client.start_stream(callback=lambda result, error: got.put(error if error else result))
        tensor = grpcclient.InferInput("IN", [1], "INT32")
        tensor.set_data_from_numpy(np.array([3], dtype=np.int32))
        client.async_stream_infer(model_name="iterative_sequence", inputs=[tensor], sequence_id=0,
                                  sequence_start=False)
        outs = []
        for _ in range(3):
            item = got.get(timeout=30)
            assert not isinstance(item, InferenceServerException), item
            outs.append(int(item.as_numpy("OUT")[0]))
        client.stop_stream()
        assert outs == [2, 1, 0]

        client.unload_model("request_rescheduling_addsub")
        client.load_model("request_rescheduling_addsub")
        values = [np.random.randn(16).astype(np.float32) for _ in range(2)]
        inputs = [grpcclient.InferInput(f"INPUT{i}", [16], "FP32") for i in range(2)]
        for tensor, value in zip(inputs, values):
            tensor.set_data_from_numpy(value)
        result = client.infer("request_rescheduling_addsub", inputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), values[0] + values[1])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), values[0] - values[1])

        # Its answer is FP16 [1] where its config.pbtxt says FP32 [16], sent as it is (as Triton's Python backend
        # sends it): 1 when its unittest passed. All three pass: the two e2e cases reload their callee first with
        # pb_utils.unload_model / load_model (the model loading API) and then run its rescheduling through BLS.
        flag = client.infer("bls_request_rescheduling", [], client_timeout=240).as_numpy("OUTPUT0")
        assert flag.tolist() == [1.0], server.log[-6000:]
        log = server.log
        assert "Ran 3 tests" in log and "\nOK\n" in log, log[-6000:]
        assert not re.findall(r"(?:ERROR|FAIL): (test_\w+)", log)


def test_the_in_process_api_streams_each_execution_of_a_request_given_back(tmp_path):
    import pytriton.tritonserver as tritonserver  # noqa: PLC0415 - (its own test: nothing else here needs it)

    server = tritonserver.Server(model_repository=str(stage(tmp_path / "repo")), exit_timeout=5).start(
        wait_until_ready=True)
    try:
        rows = [[int(np.from_dlpack(r.outputs[name]).reshape(-1)[0]) for name in ("OUT", "EXEC", "CORRID", "FLAGS")]
                + [r.final] for r in server.model("countdown").infer(inputs={"IN": np.array([3], np.int32)})]
        assert rows == [[2, 1, 1, 1, False], [1, 2, 1, 0, False], [0, 3, 1, 0, True]]
        (response,) = server.model("countdown_unary").infer(inputs={"IN": np.array([2], np.int32)})
        assert int(np.from_dlpack(response.outputs["OUT"])[0]) == 0 and response.final
    finally:
        server.stop()
