"""`TritonConfig(execution_timeout_secs=...)`: the Python API's form of `--execution-timeout`."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from pytriton.exceptions import PyTritonValidationError
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig
from tests._support.ports import FREE_PORTS

RELEASE = threading.Event()


def hangs_when_asked(requests):
    """x = 1 hangs until RELEASE is set; anything else answers at once."""
    out = []
    for request in requests:
        if request["x"][0] == 1:
            RELEASE.wait(60)
        out.append({"y": request["x"] * 2})
    return out


def _infer(client, value: float):
    tensor = grpcclient.InferInput("x", [1], "FP32")
    tensor.set_data_from_numpy(np.array([value], dtype=np.float32))
    return client.infer("hangs", [tensor], client_timeout=30)


def test_the_setting_must_be_positive():
    with pytest.raises(PyTritonValidationError, match="execution_timeout_secs"):
        TritonConfig(execution_timeout_secs=0)


def test_a_hung_call_in_the_users_process_fails_and_its_instance_waits_for_it():
    RELEASE.clear()
    config = TritonConfig(execution_timeout_secs=1.0, **FREE_PORTS)
    with Triton(config=config) as triton:
        triton.bind("hangs", hangs_when_asked, inputs=[Tensor(name="x", shape=(1,), dtype=np.float32)],
                    outputs=[Tensor(name="y", shape=(1,), dtype=np.float32)], config=ModelConfig(batching=False))
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{triton.ports['grpc']}")
        started = time.monotonic()
        with pytest.raises(InferenceServerException, match="execution timeout of 1 s"):
            _infer(client, 1)
        assert time.monotonic() - started < 20
        # The instance is a thread of this process: it cannot be killed, so it gets no work until the call returns.
        assert not client.is_model_ready("hangs")
        RELEASE.set()
        deadline = time.monotonic() + 20
        while not client.is_model_ready("hangs") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _infer(client, 3).as_numpy("y").tolist() == [6.0]
        client.close()
