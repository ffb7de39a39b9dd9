"""How a request runs through an ensemble, with a fake core whose step models are coroutines: independent steps run at
once, a step starts only once what it reads exists, a caller who leaves withdraws the steps still running, a step's
error ends the request and every step response is released exactly once."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pytriton.core.ensemble import Ensemble
from pytriton.core.ensemble_run import EnsembleRun
from pytriton.core.types import InferRequest, InferResponse, Tensor
from pytriton.exceptions import ServerError, invalid_arg
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.scheduler.job import ExecutionStats


def fp32(name: str) -> TensorSpec:
    return TensorSpec(name, "FP32", (-1,))


def diamond() -> Ensemble:
    """X -> a -> A; X -> b -> B; (A, B) -> c -> Y."""
    steps = [
        {"model_name": "c", "model_version": -1, "input_map": {"IN0": "A", "IN1": "B"}, "output_map": {"OUT": "Y"}},
        {"model_name": "a", "model_version": -1, "input_map": {"IN0": "X"}, "output_map": {"OUT": "A"}},
        {"model_name": "b", "model_version": -1, "input_map": {"IN0": "X"}, "output_map": {"OUT": "B"}},
    ]
    config = TritonModelConfig(model_name="e", inputs=[fp32("X")], outputs=[fp32("Y")],
                               ensemble_scheduling={"step": steps})
    return Ensemble(config)


class FakeModel:
    def __init__(self, ensemble: Ensemble):
        self.name = "e"
        self.version = 1
        self.config = ensemble.config


class FakeCore:
    """Runs a step by awaiting its gate; records what started, what was cancelled and what was released."""

    def __init__(self, fail: str = ""):
        self.started: list[str] = []
        self.running: set[str] = set()
        self.most_at_once = 0
        self.cancelled: list[str] = []
        self.released: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.fail = fail

    async def infer_with_stats(self, request: InferRequest, internal: bool = False
                               ) -> tuple[InferResponse, ExecutionStats]:  # fmt: skip
        name = request.model_name
        assert internal
        self.started.append(name)
        self.running.add(name)
        self.most_at_once = max(self.most_at_once, len(self.running))
        gate = self.gates.setdefault(name, asyncio.Event())
        try:
            await gate.wait()
        except asyncio.CancelledError:
            self.cancelled.append(name)
            raise
        finally:
            self.running.discard(name)
        if name == self.fail:
            raise invalid_arg(f"model '{name}' refuses")
        total = sum(np.frombuffer(t.data, np.float32) for t in request.inputs)
        out = Tensor("OUT", "FP32", (1,), (total + 1).astype(np.float32).tobytes())
        return InferResponse(name, "1", "", [out], {}, lambda: self.released.append(name)), ExecutionStats(1, 1, 2, 3)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def request() -> InferRequest:
    return InferRequest("e", inputs=[Tensor("X", "FP32", (1,), np.array([1.0], np.float32).tobytes())])


async def start(core: FakeCore) -> tuple[asyncio.Task, EnsembleRun]:
    ensemble = diamond()
    run = EnsembleRun(core, FakeModel(ensemble), ensemble, request())  # type: ignore[arg-type]
    task = asyncio.ensure_future(run.run())
    await settle()
    return task, run


def test_independent_steps_run_at_once_and_the_join_waits_for_both():
    async def main():
        core = FakeCore()
        task, run = await start(core)
        assert sorted(core.started) == ["a", "b"] and core.most_at_once == 2
        core.gates["a"].set()
        await settle()
        assert "c" not in core.started  # B does not exist yet
        core.gates["b"].set()
        await settle()
        assert core.started[-1] == "c"
        core.gates["c"].set()
        response = await task
        assert np.frombuffer(response.outputs[0].data, np.float32).tolist() == [5.0]  # (1 + 1) + (1 + 1), plus 1
        assert response.outputs[0].name == "Y"
        assert sorted(core.released) == ["a", "b"]  # read by c, which has ended: released before the answer is
        response.release()
        assert sorted(core.released) == ["a", "b", "c"]
        assert (run.stats.compute_input_ns, run.stats.compute_infer_ns, run.stats.compute_output_ns) == (3, 6, 9)

    asyncio.run(main())


def test_a_caller_who_leaves_withdraws_the_running_steps():
    async def main():
        core = FakeCore()
        task, _ = await start(core)
        core.gates["a"].set()
        await settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert core.cancelled == ["b"] and "c" not in core.started
        assert core.released == ["a"]  # a's response, held for c, released once

    asyncio.run(main())


def test_a_step_error_ends_the_request_with_it_and_withdraws_the_others():
    async def main():
        core = FakeCore(fail="a")
        task, _ = await start(core)
        core.gates["a"].set()
        with pytest.raises(ServerError) as error:
            await task
        assert error.value.message == "in ensemble 'e', model 'a' refuses"
        assert core.cancelled == ["b"] and core.released == []

    asyncio.run(main())
