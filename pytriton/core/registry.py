"""The models a server serves, looked up by name and version string as clients give them."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterator

from pytriton.core.statistics import ModelStatistics
from pytriton.exceptions import invalid_arg, not_found
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.scheduler.dispatcher import ModelScheduler
from pytriton.scheduler.instance import InstanceSource, InstanceStatus


@dataclasses.dataclass
class Model:
    """One served model version: its scheduler, the source of its instances, its statistics.

    Ready once its instances have started (`loaded`) and while at least one of them can take work.
    """

    config: TritonModelConfig
    scheduler: ModelScheduler
    source: InstanceSource
    stats: ModelStatistics = dataclasses.field(default_factory=ModelStatistics)
    loaded: bool = False
    ensemble: Any = None  # an ensemble's steps (pytriton.core.ensemble.Ensemble): ready while its steps are

    @property
    def name(self) -> str:
        return self.config.model_name

    @property
    def version(self) -> int:
        return self.config.model_version

    @property
    def ready(self) -> bool:
        if self.ensemble is not None:
            return self.loaded and self.ensemble.ready
        return self.loaded and self.scheduler.ready

    def instances(self) -> list[InstanceStatus]:
        return self.source.describe()


_LEADING_INT = re.compile(r"\s*([+-]?\d+)")


def parse_version(version: str) -> int:
    """-1 for '' (latest); else the leading integer as C++'s std::stol reads it, or Triton's INVALID_ARG."""
    if version == "":
        return -1
    match = _LEADING_INT.match(version)
    if match is None:
        raise invalid_arg(
            f"failed to get model version from specified version string '{version}' (details: stol), "
            "version should be an integral value > 0"
        )
    value = int(match.group(1))
    if value < 0:
        raise invalid_arg(f"invalid model version specified '{version}' , version should be an integral value > 0")
    return value


class ModelRegistry:
    """Models by name; one version each (the one given in the config)."""

    def __init__(self) -> None:
        self._models: dict[str, Model] = {}

    def add(self, model: Model) -> None:
        if model.name in self._models:
            raise ValueError(f"model '{model.name}' is already registered")
        self._models[model.name] = model

    def remove(self, name: str, model: Model | None = None) -> Model | None:
        """Remove the model called `name` (only if it is `model`, when given)."""
        if model is not None and self._models.get(name) is not model:
            return None
        return self._models.pop(name, None)

    def find(self, name: str) -> Model | None:
        """The model called `name`, if there is one."""
        return self._models.get(name)

    def replace(self, model: Model) -> Model | None:
        """Register `model` in place of the model of its name (returned)."""
        old = self._models.get(model.name)
        self._models[model.name] = model
        return old

    def get(self, name: str, version: str = "") -> Model:
        """The model for a request, or Triton's NOT_FOUND error."""
        number = parse_version(version)
        model = self._models.get(name)
        if model is None:
            raise not_found(f"Request for unknown model: '{name}' is not found")
        if number != -1 and number != model.version:
            raise not_found(f"Request for unknown model: '{name}' version {number} is not found")
        return model

    def __iter__(self) -> Iterator[Model]:
        return iter(sorted(self._models.values(), key=lambda m: m.name))

    def __len__(self) -> int:
        return len(self._models)
