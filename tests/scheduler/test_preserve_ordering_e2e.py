"""preserve_ordering end to end: two instances, the first request held inside the model until a file exists, the
second answered at once by the other instance. With preserve_ordering its response reaches the client only after the
first one's; without, it arrives first."""

from __future__ import annotations

import queue
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

from tests._support.ports import FREE_PORTS
from tests._support.waits import wait_for_file

WAIT_S = 30


def _gated(folder: Path):
    @batch
    def infer(x):
        if x[0, 0] == 0:  # the first request: held until the test opens the gate
            (folder / "started").touch()
            deadline = time.monotonic() + WAIT_S
            while not (folder / "gate").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return {"y": x}

    return infer


@pytest.mark.parametrize("preserve", [True, False])
def test_a_later_response_waits_for_an_earlier_one(tmp_path: Path, preserve: bool) -> None:
    with Triton(config=TritonConfig(**FREE_PORTS)) as triton:
        infer = _gated(tmp_path)
        triton.bind("gated", [infer, infer], inputs=[Tensor(name="x", shape=(1,), dtype=np.float32)],
                    outputs=[Tensor(name="y", shape=(1,), dtype=np.float32)],
                    config=ModelConfig(max_batch_size=1, batcher=DynamicBatcher(preserve_ordering=preserve)))
        triton.run()
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{triton.ports['grpc']}")
        configured = client.get_model_config("gated", as_json=True)["config"]["dynamic_batching"]
        assert bool(configured.get("preserve_ordering", False)) is preserve
        answers: queue.Queue = queue.Queue()

        def send(value: int) -> None:
            tensor = grpcclient.InferInput("x", [1, 1], "FP32")
            tensor.set_data_from_numpy(np.full((1, 1), value, dtype=np.float32))
            client.async_infer("gated", [tensor],
                               callback=lambda result, error: answers.put((value, error or result.as_numpy("y"))))

        try:
            send(0)
            wait_for_file(tmp_path / "started", WAIT_S)  # the first runs (and is held) on one instance
            send(1)  # ... the second runs on the other at once
            if preserve:
                with pytest.raises(queue.Empty):
                    answers.get(timeout=1.0)  # its response is held behind the first one's
            else:
                assert answers.get(timeout=WAIT_S)[0] == 1
        finally:
            (tmp_path / "gate").touch()
        received = [answers.get(timeout=WAIT_S) for _ in range(1 if not preserve else 2)]
        if preserve:
            assert [value for value, _ in received] == [0, 1]
        else:
            assert [value for value, _ in received] == [0]
        for value, output in received:
            assert not isinstance(output, Exception), output
            assert output.tolist() == [[value]]
        client.close()
