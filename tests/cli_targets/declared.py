"""Targets for `pytriton serve` that declare their models with @triton_model (and some that do not)."""

from __future__ import annotations

import os

import numpy as np

from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor, triton_model

VECTOR_IN = [Tensor(name="INPUT0", dtype=np.int32, shape=(4,)), Tensor(name="INPUT1", dtype=np.int32, shape=(4,))]
VECTOR_OUT = [Tensor(name="OUTPUT0", dtype=np.int32, shape=(4,)), Tensor(name="OUTPUT1", dtype=np.int32, shape=(4,))]


@triton_model(inputs=VECTOR_IN, outputs=VECTOR_OUT, config=ModelConfig(max_batch_size=8, batcher=DynamicBatcher()))
@batch
def infer_fn(INPUT0, INPUT1):
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (the mission's module: everything declared)."""
    return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}


@triton_model(inputs=[Tensor(name="IN", dtype=np.int32, shape=(-1,))],
              outputs=[Tensor(name="OUT", dtype=np.int32, shape=(-1,))],
              config=ModelConfig(max_batch_size=4), name="declared_double", instances=2, device="cpu")
def double(requests):
    return [{"OUT": r["IN"] * 2} for r in requests]


def undeclared(requests):
    return [{"OUT": r["IN"]} for r in requests]


@triton_model(outputs=[Tensor(name="OUT", dtype=np.int32, shape=(-1,))])
def outputs_only(requests):
    """Declares its outputs and forgets its inputs."""
    return [{"OUT": r["IN"]} for r in requests]


@triton_model(inputs=[], outputs=[Tensor(name="ANSWER", dtype=np.int32, shape=(1,))])
def no_inputs(requests):
    """A model that really takes no inputs."""
    return [{"ANSWER": np.array([42], dtype=np.int32)} for _ in requests]


DEVICE_IO = {"inputs": [Tensor(name="IN", dtype=np.int8, shape=(1,))],
             "outputs": [Tensor(name="DEVICE", dtype=bytes, shape=(1,)),
                         Tensor(name="PID", dtype=np.int64, shape=(1,))]}


@triton_model(**DEVICE_IO)
class OnDevice:
    """Takes the instance's device; answers it and the pid of the worker that made it."""

    def __init__(self, device: str):
        self.device = device
        self.pid = os.getpid()

    def __call__(self, requests):
        return [{"DEVICE": np.array([self.device.encode()], dtype=object), "PID": np.array([self.pid])}
                for _ in requests]


@triton_model(**DEVICE_IO)
class Plain:
    """No `device` parameter; the model is named by the method target."""

    def __init__(self):
        self.made_in = os.getpid()

    def infer(self, requests):
        return [{"DEVICE": np.array([b"none"], dtype=object), "PID": np.array([self.made_in])} for _ in requests]


@triton_model(**DEVICE_IO)
class NoCall:
    def __init__(self):
        pass


@triton_model(**DEVICE_IO)
class FailsToStart:
    def __init__(self):
        raise RuntimeError("the weights are missing on purpose")

    def __call__(self, requests):
        return []


@triton_model(inputs=[Tensor(name="IN", dtype=np.int32, shape=(-1,))],
              outputs=[Tensor(name="OUT", dtype=np.int32, shape=(-1,))],
              config=ModelConfig(batching=False, response_cache=True))
def cached(requests):
    """Declares a response cache, which pytriton does not have yet."""
    return [{"OUT": r["IN"]} for r in requests]
