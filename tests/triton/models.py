"""Inference callables for the Triton API tests, in the style of PyTriton's examples."""

from __future__ import annotations

import os
import threading

import numpy as np

from pytriton.decorators import batch, fill_optionals, first_value, group_by_values, triton_context


@batch
def add_sub(a, b):
    return {"add": a + b, "sub": a - b}


@batch
def identity(**inputs):
    return {"identity_" + name: value for name, value in inputs.items()}


def times(factor):
    @batch
    def infer(values):
        return {"result": values * factor}

    return infer


def which_instance(index):
    @batch
    def infer(x):
        return {"instance": np.full((x.shape[0], 1), index, dtype=np.int32),
                "thread": np.array([[threading.current_thread().name.encode()]] * x.shape[0], dtype=object)}

    return infer


@fill_optionals(b=np.array([10.0], dtype=np.float32), c=np.array([100.0], dtype=np.float32))
@batch
def add_optional(a, b, c):
    return {"sum": a + b + c}


@batch
@group_by_values("mode")
@first_value("mode")
def by_mode(data, mode):
    key = np.asarray(mode).reshape(-1)[0]
    factor = {b"double": 2, b"triple": 3}[key if isinstance(key, bytes) else bytes(key)]
    return {"out": data * factor}


def stream_words(requests):
    """Decoupled: yields one word per response for each request's 'count'."""
    count = int(requests[0]["count"].reshape(-1)[0])
    for i in range(count):
        yield [{"word": np.array([f"word-{i}".encode()], dtype=object)} for _ in requests]


def echo_context(requests):
    """Parameters and headers come through `Request.parameters`."""
    out = []
    for r in requests:
        text = ";".join(f"{k}={v}" for k, v in sorted(r.parameters.items()))
        out.append({"params": np.array([text.encode()], dtype=object)})
    return out


@triton_context
def with_context(requests, triton_context):
    config = triton_context.model_configs[with_context]
    return [{"name": np.array([config.model_name.encode()], dtype=object)} for _ in requests]


def pid_of_server_worker(requests):
    return [{"pid": np.array([os.getpid()], dtype=np.int64)} for _ in requests]


def float64_output(requests):
    """Returns FP64 where the model declares FP32: an error with strict=True, cast without."""
    return [{"y": (r["x"] * 2).astype(np.float64)} for r in requests]
