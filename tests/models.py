"""Inference callables the tests serve with `pytriton serve tests.models:<name>`."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import numpy as np

# Datatype name (as the CLI takes it) for every Triton datatype.
ALL_DATATYPES = ["BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64",
                 "FP16", "FP32", "FP64", "BF16", "BYTES"]


def identity(requests):
    """OUT_<X> = IN_<X> for every input IN_<X>."""
    return [{"OUT_" + name[3:]: array for name, array in r.items()} for r in requests]


async def async_identity(requests):
    await asyncio.sleep(0)
    return identity(requests)


def add_sub(requests):
    return [{"OUTPUT0": r["INPUT0"] + r["INPUT1"], "OUTPUT1": r["INPUT0"] - r["INPUT1"]} for r in requests]


def raises(requests):
    raise ValueError("the callable failed on purpose")


def _say_started(request) -> None:
    """Create the file named by the `started` parameter, if any: the test waits for it to know the worker is inside
    the callable with this request."""
    started = request.parameters.get("started")
    if started:
        with open(started, "w"):
            pass


def slow_pid(requests):
    """Creates the file named by the `started` parameter (if any), sleeps `sleep` seconds (request parameter), then
    returns the worker's pid as PID (INT64 [1])."""
    out = []
    for r in requests:
        _say_started(r)
        time.sleep(float(r.parameters.get("sleep", 0)))
        out.append({"PID": np.array([os.getpid()], dtype=np.int64)})
    return out


def exiting_pid(requests):
    """Like slow_pid, but calls sys.exit(N) when a request has the parameter exit=N."""
    for r in requests:
        if "exit" in r.parameters:
            sys.exit(int(r.parameters["exit"]))
    return slow_pid(requests)


def _gate(request) -> None:
    """Create the file named by the `started` parameter, then wait (up to 30 s) for the file named by `release`."""
    _say_started(request)
    release = request.parameters.get("release")
    deadline = time.monotonic() + 30
    while release and not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.01)


def gated_pid(requests):
    """Like slow_pid, but driven by files: creates the file named by the `started` parameter, then waits (up to
    30 s) until the file named by `release` exists; returns the worker's pid as PID (INT64 [1])."""
    out = []
    for r in requests:
        _gate(r)
        out.append({"PID": np.array([os.getpid()], dtype=np.int64)})
    return out


_RUN = [0]


def gated_order(requests):
    """Like gated_pid (the `started` and `release` files), but returns ORDER (INT64 [1] per batch element of INPUT):
    how many requests this worker had run before this one, plus one (the order in which a single instance ran them)."""
    out = []
    for r in requests:
        _gate(r)
        _RUN[0] += 1
        out.append({"ORDER": np.full((len(r["INPUT"]), 1), _RUN[0], dtype=np.int64)})
    return out


def echo_parameters(requests):
    """Returns the request parameters as one BYTES element 'k=v;...' (sorted)."""
    out = []
    for r in requests:
        text = ";".join(f"{k}={v!r}" for k, v in sorted(r.parameters.items()))
        out.append({"PARAMS": np.array([text.encode()], dtype=object)})
    return out


def wrong_dtype(requests):
    return [{"OUTPUT": np.zeros((4,), dtype=np.float64)} for _ in requests]


def wrong_shape(requests):
    return [{"OUTPUT": np.zeros((5,), dtype=np.float32)} for _ in requests]


def unknown_output(requests):
    return [{"NOPE": np.zeros((4,), dtype=np.float32)} for _ in requests]


def first_output_only(requests):
    """Declares OUTPUT0 and OUTPUT1 (FP32 [4]) but returns only OUTPUT0 = 2 * INPUT."""
    return [{"OUTPUT0": r["INPUT"] * 2} for r in requests]


def not_a_list(requests):
    return {"OUTPUT": np.zeros((4,), dtype=np.float32)}


def visible_devices(requests):
    """DEVICES = the worker's CUDA_VISIBLE_DEVICES (BYTES [1])."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES", "").encode()
    return [{"DEVICES": np.array([value], dtype=object)} for _ in requests]


def where_is(requests):
    """WHERE = the file mapped at the address of IN_X's data (from /proc/self/maps), OUT_X = 2 * IN_X."""
    out = []
    for r in requests:
        array = r["IN_X"]
        address = array.__array_interface__["data"][0]
        where = b"?"
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                start, end = (int(x, 16) for x in fields[0].split("-"))
                if start <= address < end:
                    where = (fields[5] if len(fields) > 5 else "[anonymous]").encode()
                    break
        out.append({"WHERE": np.array([where], dtype=object), "OUT_X": array * 2,
                    "WRITABLE": np.array([array.flags.writeable])})
    return out


def countdown(requests):
    """Decoupled: for each request, yields N = COUNT[0] responses with VALUE = N-1 ... 0, then finishes."""
    count = max(int(r["COUNT"].reshape(-1)[0]) for r in requests)
    for step in range(count):
        yield [{"VALUE": np.array([count - 1 - step], dtype=np.int32)} for _ in requests]


def batched_countdown(requests):
    """Decoupled, with a batch dimension: for the largest COUNT[0, 0] of the batch, N responses VALUE = N-1 ... 0 to
    every request (shaped as its batch), then finishes; SEEN is the number of requests executed together."""
    count = max(int(r["COUNT"].reshape(-1)[0]) for r in requests)
    for step in range(count):
        yield [{"VALUE": np.full((r["COUNT"].shape[0], 1), count - 1 - step, dtype=np.int32),
                "SEEN": np.full((r["COUNT"].shape[0], 1), len(requests), dtype=np.int32)} for r in requests]


async def async_countdown(requests):
    count = int(requests[0]["COUNT"].reshape(-1)[0])
    for step in range(count):
        await asyncio.sleep(0)
        yield [{"VALUE": np.array([count - 1 - step], dtype=np.int32)} for _ in requests]


def batch_size_seen(requests):
    """SEEN = the number of requests executed together and the total batch size of that execution."""
    total = sum(r["INPUT"].shape[0] for r in requests)
    return [{"SEEN": np.tile(np.array([[len(requests), total]], dtype=np.int32), (r["INPUT"].shape[0], 1))}
            for r in requests]


def slow_countdown(requests):
    """Decoupled: like countdown, 10 ms per response."""
    count = max(int(r["COUNT"].reshape(-1)[0]) for r in requests)
    for step in range(count):
        time.sleep(0.01)
        yield [{"VALUE": np.array([count - 1 - step], dtype=np.int32)} for _ in requests]


def delayed_countdown(requests):
    """Decoupled: creates the `started` files (request parameter, if any), sleeps `first_delay` seconds (request
    parameter), then like countdown (COUNT = 0: no response)."""
    for r in requests:
        _say_started(r)
    time.sleep(max(float(r.parameters.get("first_delay", 0)) for r in requests))
    yield from countdown(requests)


def cuda_info(requests):
    """OUT_X = 2 * IN_X (numpy or cupy); KIND = b"cupy" when IN_X is a GPU array, else b"numpy"."""
    out = []
    for r in requests:
        array = r["IN_X"]
        kind = b"cupy" if hasattr(array, "__cuda_array_interface__") else b"numpy"
        out.append({"OUT_X": array * 2, "KIND": np.array([kind], dtype=object)})
    return out


_executions = 0


def counted_double(requests):
    """OUT = 2 IN; CALLS = the executions of this worker so far, this one included (INT64 [1])."""
    global _executions
    _executions += 1
    return [{"OUT": r["IN"] * 2, "CALLS": np.array([_executions], dtype=np.int64)} for r in requests]


def gated_identity(requests):
    """Like identity, but driven by files as gated_pid: creates `started`, waits (up to 30 s) for `release`, and only
    then reads its inputs (so an input overwritten meanwhile would show in the answer)."""
    for r in requests:
        _gate(r)
    return identity(requests)


def alignment_probe(requests):
    """OUT_X = IN_X; ALIGNED: whether every input array the model got is aligned for its dtype (numpy's flag);
    RECEIVED: whether IN_X is a view of one of the server's receive segments (a mapping of a pytriton_*_rcv* file)."""
    def received(array: np.ndarray) -> bool:
        address = array.ctypes.data
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                start, end = (int(part, 16) for part in fields[0].split("-"))
                if start <= address < end:
                    return len(fields) > 5 and "_rcv" in fields[5]
        return False

    return [{"OUT_X": r["IN_X"], "ALIGNED": np.array([all(a.flags.aligned for a in r.values())]),
             "RECEIVED": np.array([received(r["IN_X"])])} for r in requests]


def gated_digest(requests):
    """gated_identity, and then the sha256 of IN_X's bytes written to the file the `digest` parameter names (what the
    model read, also for a request whose caller has gone); the `outcome` parameter "raise" makes it raise, "wrong
    output" answer OUT_X as INT16."""
    import hashlib

    answers = gated_identity(requests)
    for r, answer in zip(requests, answers):
        outcome = r.parameters.get("outcome")
        if outcome == "raise":
            raise ValueError("the model failed on purpose")
        if outcome == "wrong output":
            answer["OUT_X"] = answer["OUT_X"].astype(np.int16)
    for r in requests:
        digest = r.parameters.get("digest")
        if digest:
            with open(digest + ".tmp", "w") as file:
                file.write(hashlib.sha256(r["IN_X"].tobytes()).hexdigest())
            os.replace(digest + ".tmp", digest)
    return answers


def large_views(requests):
    """Large outputs of several dtypes and layouts from IN_X (fp32, a multiple of 1024 elements): OUT_T the input as
    (n, 1024) transposed (a view of the input), OUT_B = IN_X > 0 (bool), OUT_H its fp16 reversed (a view), OUT_L its
    int64 (tests/e2e/test_output_copy.py: outputs copied by several threads)."""
    out = []
    for r in requests:
        x = r["IN_X"]
        out.append({"OUT_T": x.reshape(-1, 1024).T, "OUT_B": x > 0, "OUT_H": x.astype(np.float16)[::-1],
                    "OUT_L": x.astype(np.int64)})
    return out
