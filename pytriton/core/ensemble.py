"""Ensembles (platform "ensemble"): a pipeline of other served models that the server runs itself, as Triton's
ensemble scheduler does. An ensemble has no instances of its own; it is ready while each of its steps' models is.

Its steps are checked against the models they name when it is loaded (Triton's rules: every step input mapped,
names that exist, consistent data types and shapes, a max_batch_size its steps allow), with errors that name the
config file and the field. How a request runs through the steps is `pytriton.core.ensemble_run`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pytriton.exceptions import ServerError, invalid_arg
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.scheduler.instance import InstanceStatus

if TYPE_CHECKING:
    from pytriton.core.registry import Model, ModelRegistry

# The target of an ensemble in a model list (a worker target names a callable or a model file): the config file.
TARGET_PREFIX = "ensemble:"
LATEST = -1


@dataclasses.dataclass(frozen=True)
class EnsembleStep:
    """One step: the model it runs (version -1: the latest) and how its tensors map to the ensemble's."""

    index: int
    model_name: str
    model_version: int
    input_map: dict[str, str]  # the step model's input -> the ensemble tensor that feeds it
    output_map: dict[str, str]  # the step model's output -> the ensemble tensor it writes

    @property
    def version_string(self) -> str:
        return "" if self.model_version == LATEST else str(self.model_version)


def ensemble_steps(scheduling: dict[str, Any]) -> list[EnsembleStep]:
    """The steps of Triton's `ensemble_scheduling` (JSON form, proto field names)."""
    return [EnsembleStep(index, step["model_name"], int(step.get("model_version", LATEST)),
                         dict(step.get("input_map", {})), dict(step.get("output_map", {})))
            for index, step in enumerate(scheduling.get("step", []))]


def _full_dims(spec: TensorSpec, batching: bool) -> tuple[int, ...]:
    return (-1, *spec.shape) if batching else spec.shape


def _dims_match(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b))


@dataclasses.dataclass(frozen=True)
class _Node:
    """What a model says of one ensemble tensor."""

    datatype: str
    dims: tuple[int, ...]
    full_dims: tuple[int, ...]
    origin: str


class Ensemble:
    """An ensemble's steps and data flow, and the `InstanceSource` of its model: no instances; `start` checks the
    steps against the served models."""

    def __init__(self, config: TritonModelConfig, where: str = ""):
        assert config.ensemble_scheduling is not None
        self.config = config
        self.where = where or f"model '{config.model_name}'"  # the config file, for errors
        self.steps = ensemble_steps(config.ensemble_scheduling)
        self.registry: ModelRegistry | None = None
        self.producer: dict[str, EnsembleStep] = {}  # ensemble tensor -> the step that writes it
        self.consumers: dict[str, list[EnsembleStep]] = {}  # ensemble tensor -> the steps that read it
        for step in self.steps:
            for tensor in step.output_map.values():
                self.producer[tensor] = step
            for tensor in step.input_map.values():
                self.consumers.setdefault(tensor, []).append(step)

    @property
    def name(self) -> str:
        return self.config.model_name

    # ---- InstanceSource ----------------------------------------------------------------------
    def bind(self, handler: Any) -> None:
        """An ensemble's scheduler gets no instances: requests run through its steps' schedulers."""

    async def start(self) -> None:
        self.validate()

    async def stop(self, timeout_s: float = 10.0) -> None:
        pass

    def describe(self) -> list[InstanceStatus]:
        return []

    # ---- steps -------------------------------------------------------------------------------
    def step_model(self, step: EnsembleStep) -> Model:
        """The model a step runs now (looked up per request: a reload swaps it), or Triton's NOT_FOUND error."""
        assert self.registry is not None, "the ensemble is not registered"
        return self.registry.get(step.model_name, step.version_string)

    @property
    def ready(self) -> bool:
        """Whether every step's model is served and ready."""
        try:
            return all(self.step_model(step).ready for step in self.steps)
        except ServerError:
            return False

    def _error(self, field: str, problem: str) -> ServerError:
        return invalid_arg(f"{self.where}: field '{field}' of ensemble '{self.name}': {problem}")

    def validate(self) -> None:
        """Check every step against the model it names (Triton's ensemble validation, its wording after the field)."""
        batching = self.config.max_batch_size > 0
        own = f"ensemble '{self.name}'"
        nodes: dict[str, _Node] = {}
        for spec in [*self.config.inputs, *self.config.outputs]:
            nodes[spec.name] = _Node(spec.datatype, spec.shape, _full_dims(spec, batching), self.name)
        for step in self.steps:
            field = f"ensemble_scheduling.step[{step.index}]"
            try:
                model = self.step_model(step)
            except ServerError:
                wanted = "which has no loaded version" if step.model_version == LATEST else \
                    f"whose required version {step.model_version} is not loaded"
                raise self._error(f"{field}.model_name", f"{own} depends on '{step.model_name}' {wanted}") from None
            config = model.config
            if self._reaches_self(model, set()):
                raise self._error(f"{field}.model_name", f"{own} depends on '{step.model_name}', which runs "
                                                         f"ensemble '{self.name}' itself: a cycle")
            if config.ensemble_scheduling is None and config.decoupled:
                raise self._error(f"{field}.model_name", f"model '{step.model_name}' is decoupled: decoupled models "
                                                         "in an ensemble are not supported yet")
            if config.max_batch_size != 0 and config.max_batch_size < self.config.max_batch_size:
                raise self._error("max_batch_size", f"{own} allows maximum batch size {self.config.max_batch_size}, "
                                                    f"but it contains model {step.model_name} which only allows "
                                                    f"maximum batch size to be {config.max_batch_size}")
            step_batching = config.max_batch_size > 0
            for key, tensor in step.input_map.items():
                if key not in config.input_by_name:
                    raise self._error(f"{field}.input_map", f"in {own}, ensemble tensor {tensor} is mapping to "
                                                            f"non-existing input {key} in model {step.model_name}")
            for spec in config.inputs:
                mapped = step.input_map.get(spec.name)
                if mapped is None:
                    if spec.optional:
                        continue
                    raise self._error(f"{field}.input_map", f"in {own}, input {spec.name} in model "
                                                            f"{step.model_name} is not mapped to any ensemble tensors")
                self._check(nodes, mapped, spec, step_batching, step.model_name, f"{field}.input_map")
            for key, tensor in step.output_map.items():
                spec_out = config.output_by_name.get(key)
                if spec_out is None:
                    raise self._error(f"{field}.output_map", f"in {own}, ensemble tensor {tensor} is mapped from "
                                                             f"non-existing output {key} in model {step.model_name}")
                self._check(nodes, tensor, spec_out, step_batching, step.model_name, f"{field}.output_map")

    def _reaches_self(self, model: Model, seen: set[str]) -> bool:
        """Whether `model` is this ensemble, or an ensemble whose steps (at any depth) run it."""
        if model.name == self.name:
            return True
        nested = model.ensemble
        if nested is None or model.name in seen:
            return False
        seen.add(model.name)
        for step in nested.steps:
            try:
                inner = nested.step_model(step)
            except (ServerError, AssertionError):
                continue
            if self._reaches_self(inner, seen):
                return True
        return False

    def _check(self, nodes: dict[str, _Node], tensor: str, spec: TensorSpec, batching: bool, model: str,
               field: str) -> None:  # fmt: skip
        node = _Node(spec.datatype, spec.shape, _full_dims(spec, batching), model)
        known = nodes.setdefault(tensor, node)
        if known is node:
            return
        prefix = f"in ensemble '{self.name}', ensemble tensor {tensor}: "
        if known.datatype != node.datatype:
            raise self._error(field, f"{prefix}inconsistent data type: {known.datatype} is inferred from model "
                                     f"{known.origin} while {node.datatype} is inferred from model {node.origin}")
        if not _dims_match(known.dims, node.dims) and not _dims_match(known.full_dims, node.full_dims):
            raise self._error(field, f"{prefix}inconsistent shape: {list(known.full_dims)} is inferred from model "
                                     f"{known.origin} while {list(node.full_dims)} is inferred from model "
                                     f"{node.origin}")


__all__ = ["TARGET_PREFIX", "Ensemble", "EnsembleStep", "ensemble_steps"]
