"""The sequence batcher's compact rows: the worker adds the control inputs the server used to send (same values, same
bytes), makes a not-ready row from the batch's first ready row, and the server sends only flags for them."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pytriton.backends.sequence_rows import SequenceRows, sequence_rows
from pytriton.core.sequence_controls import SequenceControls
from pytriton.core.types import SEQUENCE_CONTROLS, SEQUENCE_NOT_READY, ExecutionRequest, Tensor
from pytriton.model_config.datatypes import deserialize_bytes_tensor
from pytriton.model_config.sequence import ControlKind, SequenceBatcher, SequenceControl, SequenceState
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.messages import (
    FLAG_NOT_READY,
    FLAG_SEQUENCE_CONTROLS,
    FLAG_SEQUENCE_ID_PARAM,
    FLAG_START_PARAM,
    RequestData,
    TensorData,
)
from pytriton.proxy.types import Request
from pytriton.supervisor.instance import to_request_data
from tests.backends.worker_thread import Replies, run_worker

START, END = 1, 2
CONTROLS = (
    SequenceControl(ControlKind.START, "START", "INT32", (0, 1)),
    SequenceControl(ControlKind.END, "END", "FP32", (0.25, 0.75)),
    SequenceControl(ControlKind.READY, "READY", "BOOL", (False, True)),
)


def config(corrid: str = "UINT64", max_batch_size: int = 8, states: tuple = ()) -> TritonModelConfig:
    policy = SequenceBatcher(controls=(*CONTROLS, SequenceControl(ControlKind.CORRID, "CORRID", corrid)),
                             states=states)
    return TritonModelConfig(model_name="seq", inputs=[TensorSpec("INPUT", "FP32", (3,))],
                             outputs=[TensorSpec("OUTPUT", "FP32", (3,))], max_batch_size=max_batch_size,
                             sequence_batcher=policy)


def server_controls(cfg: TritonModelConfig, correlation_id: int | str, start: bool, end: bool, ready: bool
                    ) -> dict[str, np.ndarray]:  # fmt: skip
    """What the server sends when it builds the controls itself (a model with implicit state still gets them so)."""
    controls = SequenceControls("seq", cfg.sequence_batcher, cfg.max_batch_size)
    out = {}
    for tensor in controls._controls(correlation_id, start, end, ready):
        if tensor.datatype == "BYTES":
            out[tensor.name] = deserialize_bytes_tensor(tensor.data, tensor.shape)
        else:
            out[tensor.name] = np.frombuffer(tensor.data, dtype=np.dtype({"INT32": np.int32, "FP32": np.float32,
                                                                          "BOOL": np.bool_, "UINT64": np.uint64,
                                                                          "INT64": np.int64, "UINT32": np.uint32}[
                tensor.datatype])).reshape(tensor.shape)
    return out


def ready_row(correlation_id: int | str, flags: int, value: float = 1.0) -> Request:
    return Request({"INPUT": np.full((1, 3), value, np.float32)}, {"sequence_id": correlation_id}, None, None, "",
                   correlation_id, flags | FLAG_SEQUENCE_CONTROLS)


def not_ready_row() -> Request:
    return Request({}, {}, None, None, "", 0, FLAG_SEQUENCE_CONTROLS | FLAG_NOT_READY)


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert list(got) == list(want)
    for name, array in want.items():
        assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
        assert got[name].tolist() == array.tolist(), name


@pytest.mark.parametrize("corrid, correlation_id", [("UINT64", 2**64 - 1), ("INT64", 2**64 - 5), ("UINT32", 2**40 + 7),
                                                    ("INT32", 0xFFFFFFFF), ("BYTES", "session-7")])
@pytest.mark.parametrize("flags", [0, START, END, START | END])
def test_a_ready_row_gets_the_controls_the_server_sent(corrid, correlation_id, flags):
    cfg = config(corrid)
    rows = SequenceRows(cfg)
    request = ready_row(correlation_id, flags)
    requests, failed = rows.complete([request], [""])
    assert requests == [request] and failed == [""]
    want = {"INPUT": request.data["INPUT"]} | server_controls(cfg, correlation_id, bool(flags & START),
                                                              bool(flags & END), True)
    assert_same(request.data, want)
    assert request.flags == flags  # the model sees the client's flags only
    assert request.correlation_id == correlation_id and request.parameters == {"sequence_id": correlation_id}


@pytest.mark.parametrize("corrid", ["UINT64", "BYTES"])
def test_a_not_ready_row_is_zeros_shaped_as_the_first_ready_row_with_false_controls(corrid):
    cfg = config(corrid)
    rows = SequenceRows(cfg)
    first, second = not_ready_row(), not_ready_row()
    ready = ready_row(41 if corrid == "UINT64" else "a", START, 5.0)
    ready.data["TEXT"] = np.array([[b"x", b"yz"]], dtype=np.object_)
    requests, failed = rows.complete([first, ready, second], ["", "", ""])
    assert requests == [first, ready, second] and failed == ["", "", ""]
    for row in (first, second):
        want = {"INPUT": np.zeros((1, 3), np.float32), "TEXT": np.array([[b"", b""]], dtype=np.object_)}
        assert_same(row.data, want | server_controls(cfg, 0, False, False, False))
        assert row.flags == 0 and row.correlation_id == 0 and row.parameters == {}
        assert not any(array.flags.writeable for array in row.data.values())
    assert ready.data["INPUT"].tolist() == [[5.0, 5.0, 5.0]]  # (the template itself is untouched)


def test_unbatched_model_gets_controls_shaped_1():
    cfg = config(max_batch_size=0)
    request = ready_row(3, START)
    SequenceRows(cfg).complete([request], [""])
    assert {name: array.shape for name, array in request.data.items() if name != "INPUT"} == {
        "START": (1,), "END": (1,), "READY": (1,), "CORRID": (1,)}


def test_not_ready_rows_without_a_ready_row_fail():
    rows = SequenceRows(config())
    lone, other = not_ready_row(), not_ready_row()
    requests, failed = rows.complete([lone, other], ["", "region gone", ""])  # (the ready row's region was gone)
    assert requests == []
    assert failed[1] == "region gone"
    assert all("not-ready row of model 'seq' without a ready row" in failed[i] for i in (0, 2))


def test_unflagged_rows_are_left_alone():
    plain = Request({"INPUT": np.ones((1, 3), np.float32)}, {}, None, None, "", 0, START)
    requests, failed = SequenceRows(config()).complete([plain], [""])
    assert requests == [plain] and failed == [""] and plain.data.keys() == {"INPUT"} and plain.flags == START


def test_only_a_model_with_controls_gets_sequence_rows():
    assert sequence_rows(config()) is not None
    plain = TritonModelConfig(model_name="plain", inputs=[TensorSpec("INPUT", "FP32", (3,))],
                              outputs=[TensorSpec("OUTPUT", "FP32", (3,))], max_batch_size=8)
    assert sequence_rows(plain) is None


def test_the_server_sends_flags_instead_of_control_tensors():
    cfg = config()
    controls = SequenceControls("seq", cfg.sequence_batcher, cfg.max_batch_size)
    assert controls.compact
    client = ExecutionRequest([Tensor("INPUT", "FP32", (1, 3), bytes(12)), Tensor("READY", "BOOL", (1, 1), b"\x01")],
                              {}, ["OUTPUT"], {}, {"sequence_id": 9, "sequence_start": True})
    prepared = controls.prepare(client, 9, True, False)
    assert [t.name for t in prepared.inputs] == ["INPUT"]  # a client cannot set a control itself
    data = to_request_data(prepared)
    # (the sequence parameters travel in the fields: flagged, out of the parameters map)
    assert (data.correlation_id, data.flags) == (9, START | FLAG_SEQUENCE_CONTROLS | FLAG_SEQUENCE_ID_PARAM
                                                 | FLAG_START_PARAM)
    assert data.parameters == {}
    null = controls.null(prepared)
    assert null.inputs == [] and null.requested_outputs == ["OUTPUT"]
    assert null.sequence == SEQUENCE_CONTROLS | SEQUENCE_NOT_READY
    data = to_request_data(null)
    assert (data.correlation_id, data.flags, data.inputs) == (0, FLAG_SEQUENCE_CONTROLS | FLAG_NOT_READY, [])


def test_a_model_with_implicit_state_still_gets_its_controls_from_the_server():
    cfg = config(states=(SequenceState("STATE_IN", "STATE_OUT", "FP32", (3,)),))
    controls = SequenceControls("seq", cfg.sequence_batcher, cfg.max_batch_size)
    assert not controls.compact
    client = ExecutionRequest([Tensor("INPUT", "FP32", (1, 3), bytes(12))], {}, [], {}, {"sequence_id": 9})
    prepared = controls.prepare_state(client, 9, False, False, None)
    assert prepared.sequence == 0
    assert [t.name for t in prepared.inputs] == ["INPUT", "START", "END", "READY", "CORRID", "STATE_IN"]
    assert to_request_data(prepared).flags == FLAG_SEQUENCE_ID_PARAM  # (no controls to add: only the parameter)


def test_the_worker_hands_the_model_completed_rows_and_sends_no_answer_for_not_ready_ones():
    """Through a real router and worker loop: what the callable gets, and the RESULT the server reads back."""
    cfg = config()
    seen: list[tuple[dict[str, list], int, int | str]] = []

    def fn(requests):
        seen.extend(({name: array.tolist() for name, array in r.data.items()}, r.flags, r.correlation_id)
                    for r in requests)
        return [{"OUTPUT": np.asarray(r["INPUT"]) * 2} for r in requests]

    async def scenario(router, link, stop):
        replies = Replies(link)
        absent: list[bool] = []
        on_reply = replies.on_reply

        def record(message, frames):
            absent.extend(item.absent for item in message.responses)
            on_reply(message, frames)

        replies.on_reply = record
        ready = RequestData([TensorData("INPUT", "FP32", (1, 3), np.arange(3, dtype=np.float32).tobytes())], [],
                            {"sequence_id": 12, "sequence_start": True}, correlation_id=12,
                            flags=START | FLAG_SEQUENCE_CONTROLS)
        null = RequestData([], [], {}, flags=FLAG_SEQUENCE_CONTROLS | FLAG_NOT_READY)
        router.submit(link, [null, ready], replies)
        await asyncio.wait_for(replies.final, 10)
        assert absent == [True, False] and replies.values == [0, 1] and replies.errors == []

    run_worker(cfg, fn, scenario)
    assert seen == [
        ({"INPUT": [[0.0, 0.0, 0.0]], "START": [[0]], "END": [[0.25]], "READY": [[False]], "CORRID": [[0]]}, 0, 0),
        ({"INPUT": [[0.0, 1.0, 2.0]], "START": [[1]], "END": [[0.25]], "READY": [[True]], "CORRID": [[12]]}, START, 12),
    ]


def test_not_ready_rows_get_their_own_dicts_of_the_same_zeros():
    rows = SequenceRows(config())
    ready = Request({"INPUT": np.ones((1, 3), np.float32)}, {}, None, None, "", 5, START | FLAG_SEQUENCE_CONTROLS)
    first, second = not_ready_row(), not_ready_row()
    rows.complete([ready, first, second], ["", "", ""])
    assert first.data is not second.data and first.data.keys() == second.data.keys()
    assert list(first.data) == ["INPUT", "START", "END", "READY", "CORRID"]
    for name, array in first.data.items():
        np.testing.assert_array_equal(array, server_controls(config(), 0, False, False, False).get(
            name, np.zeros((1, 3), np.float32)))
    first.data["INPUT"] = np.ones((1, 3), np.float32)  # (a model that replaces a row's input changes that row only)
    third = not_ready_row()
    rows.complete([ready, third], ["", ""])
    assert not third.data["INPUT"].any()
    wider = Request({"INPUT": np.ones((1, 5), np.float32)}, {}, None, None, "", 5, FLAG_SEQUENCE_CONTROLS)
    fourth = not_ready_row()
    rows.complete([wider, fourth], ["", ""])
    assert fourth.data["INPUT"].shape == (1, 5)


@pytest.mark.parametrize("corrid", ["UINT64", "BYTES"])
def test_a_whole_batch_of_mixed_rows_gets_what_the_server_sent(corrid):
    """Every flag combination in one batch, not-ready rows before, between and after: each row's controls as the
    server built them, in the config's order after the inputs; the not-ready rows' dicts are their own."""
    cfg = config(corrid)
    rows = SequenceRows(cfg)
    ids = [5, 6, 7, 8] if corrid == "UINT64" else ["a", "b", "c", "d"]
    ready = [ready_row(ids[i], flags, float(i)) for i, flags in enumerate((0, START, END, START | END))]
    nulls = [not_ready_row() for _ in range(3)]
    batch = [nulls[0], ready[0], ready[1], nulls[1], ready[2], ready[3], nulls[2]]
    for _ in range(2):  # (again with the rows' kept parts)
        fresh = [Request(dict(r.data) if not r.flags & FLAG_NOT_READY else {}, dict(r.parameters), None, None, "",
                         r.correlation_id, r.flags) for r in batch]
        requests, failed = rows.complete(fresh, [""] * len(fresh))
        assert requests == fresh and failed == [""] * 7
        for row, source in zip(fresh, batch):
            if source.flags & FLAG_NOT_READY:
                want = {"INPUT": np.zeros((1, 3), np.float32)} | server_controls(cfg, 0, False, False, False)
            else:
                flags = source.flags & 3
                want = {"INPUT": source.data["INPUT"]} | server_controls(cfg, source.correlation_id,
                                                                         bool(flags & START), bool(flags & END), True)
                assert row.flags == flags
            assert_same(row.data, want)
        assert len({id(fresh[i].data) for i in (0, 3, 6)}) == 3
        fresh[0].data["EXTRA"] = np.zeros(1)
        assert "EXTRA" not in fresh[3].data
