"""One request through an ensemble: each step is sent to its model's own scheduler (its queue and dynamic batching
apply) as soon as the tensors it reads exist, so steps that do not depend on each other run at once; outputs flow on
to later steps and the ensemble answers with the tensors mapped to its outputs.

Tensors are never copied here: a step's output (a view of its worker's response arena, which the transport can name)
becomes the next step's input as it is, and the worker of the next step maps it where it lies. A step's response is
held until the steps that read it have ended (and, if it holds ensemble outputs, until the ensemble's response is
released). A step's error ends the request with that error ("in ensemble 'e', ..."), the other steps withdrawn; a
caller that goes away (cancel, deadline) withdraws every step still queued or running.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING, Any

from pytriton.core.call_chain import through_ensemble
from pytriton.core.ensemble import Ensemble, EnsembleStep
from pytriton.core.trace import REQUEST_END, REQUEST_START
from pytriton.core.types import InferRequest, InferResponse, RequestedOutput, Tensor
from pytriton.core.validation import validate_request
from pytriton.exceptions import ServerError, internal, unavailable, unsupported
from pytriton.scheduler.job import ExecutionStats

if TYPE_CHECKING:
    from pytriton.core.registry import Model
    from pytriton.core.server_core import ServerCore


class _Held:
    """A step's response, released once no step still to end reads it and the ensemble's answer does not need it."""

    __slots__ = ("response", "users")

    def __init__(self, response: InferResponse, users: int):
        self.response = response
        self.users = users

    def drop(self) -> None:
        self.users -= 1
        if self.users <= 0:
            self.response.release()


class EnsembleRun:
    """The state of one request in an ensemble."""

    def __init__(self, core: ServerCore, model: Model, ensemble: Ensemble, request: InferRequest):
        self.core = core
        self.model = model
        self.ensemble = ensemble
        self.request = request
        self.values: dict[str, Tensor] = {t.name: t for t in request.inputs}  # ensemble tensors that exist so far
        self.absent: set[str] = set()  # ensemble tensors a step ran without returning (never to exist)
        self.source: dict[str, _Held] = {}  # ensemble tensor -> the response holding it
        self.held: list[_Held] = []
        self.inputs_of: dict[int, list[_Held]] = {}  # step index -> the responses its inputs came from
        self.stats = ExecutionStats()
        self.wanted = [o.name for o in request.outputs] or [s.name for s in model.config.outputs]
        self.output_parameters = {o.name: o.parameters for o in request.outputs if o.parameters}

    def _step_request(self, step: EnsembleStep) -> InferRequest:
        inputs = []
        used: list[_Held] = []
        for key, tensor in step.input_map.items():
            value = self.values.get(tensor)
            if value is None:  # an optional ensemble input the request left out: the step's input is left out too
                continue
            inputs.append(dataclasses.replace(value, name=key))
            holder = self.source.get(tensor)
            if holder is not None and holder not in used:
                used.append(holder)
        self.inputs_of[step.index] = used
        outputs = []
        for key, tensor in step.output_map.items():
            parameters = self.output_parameters.get(tensor, {})
            if parameters and tensor in self.ensemble.consumers:
                raise unsupported(f"in ensemble '{self.ensemble.name}', output '{tensor}' is also read by a later "
                                  "step: it cannot be requested into shared memory or as a classification")
            outputs.append(RequestedOutput(key, dict(parameters)))
        return InferRequest(step.model_name, step.version_string, self.request.id, inputs, outputs,
                            dict(self.request.parameters),
                            chain=through_ensemble(self.request.chain, self.model.name, self.model.version))

    def _collect(self, step: EnsembleStep, response: InferResponse) -> list[EnsembleStep]:
        """Take a step's outputs; return the steps that can start now."""
        produced = {t.name: t for t in response.outputs}
        keep = sum(1 for tensor in step.output_map.values() if tensor in self.wanted)
        readers = {s.index for tensor in step.output_map.values() for s in self.ensemble.consumers.get(tensor, [])}
        holder = _Held(response, len(readers) + (1 if keep else 0))
        self.held.append(holder)
        if holder.users == 0:
            holder.drop()
        for key, tensor in step.output_map.items():
            value = produced.get(key)
            if value is None:  # (as Triton: the steps that read it run without it, which an optional input allows,
                self.absent.add(tensor)  # and the answer leaves it out)
                continue
            self.values[tensor] = dataclasses.replace(value, name=tensor)
            self.source[tensor] = holder
        return [s for s in self.ensemble.steps if s.index not in self.inputs_of
                and all(t in self.values or t in self.absent or t not in self.ensemble.producer
                        for t in s.input_map.values())]

    async def _run_step(self, step: EnsembleStep, request: InferRequest) -> tuple[InferResponse, ExecutionStats]:
        return await self.core.infer_with_stats(request, internal=True)

    async def run(self) -> InferResponse:
        tasks: dict[asyncio.Task[Any], EnsembleStep] = {}
        released = False

        def start(steps: list[EnsembleStep]) -> None:
            for step in steps:
                request = self._step_request(step)
                tasks[asyncio.ensure_future(self._run_step(step, request))] = step

        try:
            start([s for s in self.ensemble.steps if all(t not in self.ensemble.producer for t in s.input_map.values())])
            while tasks:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    step = tasks.pop(task)
                    for holder in self.inputs_of[step.index]:
                        holder.drop()
                    try:
                        response, stats = task.result()
                    except ServerError as exc:
                        raise ServerError(exc.status, f"in ensemble '{self.ensemble.name}', {exc.message}") from None
                    self.stats.compute_input_ns += stats.compute_input_ns
                    self.stats.compute_infer_ns += stats.compute_infer_ns
                    self.stats.compute_output_ns += stats.compute_output_ns
                    start(self._collect(step, response))
            outputs = []
            for name in self.wanted:
                value = self.values.get(name)
                if value is None:
                    if name in self.absent:
                        continue
                    raise internal(f"in ensemble '{self.ensemble.name}', output '{name}' was not written")
                outputs.append(value)
            released = True
            holders = [h for h in self.held if h.users > 0]

            def release() -> None:
                for holder in holders:
                    holder.response.release()

            return InferResponse(self.model.name, str(self.model.version), self.request.id, outputs, {}, release)
        finally:
            if not released:
                await self._abandon(tasks)

    async def _abandon(self, tasks: dict[asyncio.Task[Any], EnsembleStep]) -> None:
        """The request ended early: withdraw the steps still running, release every response held."""
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, tuple):
                result[0].release()
        for holder in self.held:
            holder.response.release()


async def run_ensemble(core: ServerCore, model: Model, request: InferRequest, internal: bool = False
                       ) -> tuple[InferResponse, ExecutionStats]:  # fmt: skip
    """Answer `request` to the ensemble `model` (`internal`: it is a step of another ensemble), recording the
    ensemble's statistics as Triton does: one execution per request, its compute durations the sums of its steps'
    (returned with the response)."""
    ensemble = model.ensemble
    assert isinstance(ensemble, Ensemble)
    start = time.perf_counter_ns()
    if not core.accepting and not internal:
        raise unavailable("Server not ready")
    batch_size = validate_request(model.config, request)  # (a request refused here is no failure of the model's:
    # Triton counts none, as for any model's request refused before it is scheduled)
    try:
        run = EnsembleRun(core, model, ensemble, request)
        end = core.request_began()
        try:
            response = await run.run()
        finally:
            end()
    except ServerError:
        model.stats.record_failure(time.perf_counter_ns() - start)
        raise
    stats = run.stats
    model.stats.record_success(batch_size, time.perf_counter_ns() - start, 0, stats.compute_input_ns,
                               stats.compute_infer_ns, stats.compute_output_ns)
    model.stats.record_execution(max(batch_size, 1), stats.compute_input_ns, stats.compute_infer_ns,
                                 stats.compute_output_ns)
    return response, stats


async def infer_ensemble(core: ServerCore, model: Model, request: InferRequest, internal: bool = False
                         ) -> tuple[InferResponse, ExecutionStats]:  # fmt: skip
    """`ServerCore.begin`'s ensemble variant: `run_ensemble`, with the request's trace stamped around it."""
    trace = request.trace
    if trace is not None:
        trace.model_version = str(model.version)
        trace.stamp(REQUEST_START)
    answer = await run_ensemble(core, model, request, internal)
    if trace is not None:
        trace.stamp(REQUEST_END)
    return answer


__all__ = ["infer_ensemble", "run_ensemble"]
