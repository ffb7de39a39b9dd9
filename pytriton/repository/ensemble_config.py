"""An ensemble's `config.pbtxt` (platform "ensemble", `ensemble_scheduling { step [...] }`): its own rules checked
as Triton checks them when it reads the file (fields it may not set, every step complete, a data flow in which every
step input is fed, every output written, no tensor written twice and none unused). The steps are checked against
the models they name when the ensemble is loaded (`pytriton.core.ensemble`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tritonclient.grpc import model_config_pb2 as pb

from pytriton.model_config.triton_model_config import TensorSpec

ENSEMBLE_PLATFORM = "ensemble"
# Fields an ensemble may not set (Triton: it has no instances, no backend optimization and no warmup of its own).
_REFUSED = (("instance_group", "instance group should not be specified for ensemble '{name}'"),
            ("optimization", "optimization should not be specified for ensemble '{name}'"),
            ("model_warmup", "model_warmup can not be specified for ensemble '{name}'"),
            ("dynamic_batching", "an ensemble is scheduled by its steps (dynamic batching belongs in a step's config)"),
            ("sequence_batching", "sequence batching of ensembles is not supported yet"))

ErrorFactory = Callable[[str, str], Exception]


def is_ensemble(config: pb.ModelConfig) -> bool:
    return bool(config.platform == ENSEMBLE_PLATFORM or config.backend == ENSEMBLE_PLATFORM)


def check_ensemble(config: pb.ModelConfig, name: str, inputs: list[TensorSpec], outputs: list[TensorSpec],
                   error: ErrorFactory) -> dict[str, Any]:
    """Check an ensemble's own fields and data flow; return its `ensemble_scheduling` in Triton's JSON form.
    `error(field, problem)` makes the exception to raise."""
    if not is_ensemble(config):
        raise error("platform", f"ensemble scheduling cannot be set for model '{name}' whose platform is not ensemble")
    if config.backend not in ("", ENSEMBLE_PLATFORM):
        raise error("backend", f"an ensemble has no backend, got '{config.backend}'")
    present = {field.name for field, _ in config.ListFields()}
    for field, problem in _REFUSED:
        if field in present:
            raise error(field, problem.format(name=name))
    if config.model_transaction_policy.decoupled:
        raise error("model_transaction_policy.decoupled", "decoupled ensembles are not supported yet")
    steps = list(config.ensemble_scheduling.step)
    if not steps:
        raise error("ensemble_scheduling.step", f"must specify 'step' for ensemble '{name}'")
    produced: dict[str, int] = {}  # ensemble tensor -> the step writing it
    read: dict[str, list[int]] = {}  # ensemble tensor -> the steps reading it
    input_names = {s.name for s in inputs}
    for index, step in enumerate(steps):
        field = f"ensemble_scheduling.step[{index}]"
        for part in ("model_name", "input_map", "output_map"):
            if not getattr(step, part):
                raise error(f"{field}.{part}", f"must specify '{part}' in step {index} of ensemble '{name}'")
        for tensor in step.output_map.values():
            if tensor in produced:
                raise error(f"{field}.output_map", f"ensemble tensor '{tensor}' can appear in an output map only "
                                                   f"once for ensemble '{name}' (step {produced[tensor]} writes it)")
            if tensor in input_names:
                raise error(f"{field}.output_map", f"ensemble tensor '{tensor}' is an input of ensemble '{name}': a "
                                                   "step cannot write it")
            produced[tensor] = index
        for tensor in step.input_map.values():
            read.setdefault(tensor, []).append(index)
    _check_flow(name, steps, inputs, outputs, produced, read, error)
    if config.ensemble_scheduling.max_inflight_requests:
        raise error("ensemble_scheduling.max_inflight_requests", "is not supported yet")
    return {"step": [{"model_name": step.model_name, "model_version": int(step.model_version),
                      "input_map": dict(step.input_map), "output_map": dict(step.output_map),
                      "model_namespace": step.model_namespace} for step in steps]}


def _check_flow(name: str, steps: list[Any], inputs: list[TensorSpec], outputs: list[TensorSpec],
                produced: dict[str, int], read: dict[str, list[int]], error: ErrorFactory) -> None:
    """Triton's data-flow check: from the ensemble's inputs, a step runs once every tensor it reads exists."""
    for spec in inputs:
        if spec.name not in read:
            raise error("input", f"ensemble input '{spec.name}' for ensemble '{name}' is not used")
    ready = {s.name for s in inputs}
    done: set[int] = set()
    progress = True
    while progress:
        progress = False
        for index, step in enumerate(steps):
            if index not in done and all(t in ready for t in step.input_map.values()):
                done.add(index)
                ready.update(step.output_map.values())
                progress = True
    for spec in outputs:
        if spec.name not in produced:
            raise error("output", f"ensemble output '{spec.name}' for ensemble '{name}' is not written by any step")
        if spec.name not in ready:
            missing = _unfed(steps, produced, ready, spec.name)
            raise error(f"ensemble_scheduling.step[{produced[spec.name]}].input_map",
                        f"output '{spec.name}' for ensemble '{name}' is not written: at least one of its depending "
                        f"tensors, '{missing}', is not connected")
    output_names = {s.name for s in outputs}
    for tensor, index in produced.items():
        if tensor not in output_names and tensor not in read:
            raise error(f"ensemble_scheduling.step[{index}].output_map",
                        f"ensemble tensor '{tensor}' is unused in ensemble '{name}'")
    for tensor, readers in read.items():
        if tensor not in ready:
            raise error(f"ensemble_scheduling.step[{readers[0]}].input_map",
                        f"ensemble tensor '{tensor}' is unused in ensemble '{name}': nothing writes it")


def _unfed(steps: list[Any], produced: dict[str, int], ready: set[str], tensor: str) -> str:
    """The first tensor upstream of `tensor` that nothing feeds (or that a cycle keeps from being written)."""
    seen: set[str] = set()
    while tensor in produced and tensor not in seen:
        seen.add(tensor)
        missing = [t for t in steps[produced[tensor]].input_map.values() if t not in ready]
        if not missing:
            break
        tensor = missing[0]
    return tensor


__all__ = ["ENSEMBLE_PLATFORM", "check_ensemble", "is_ensemble"]
