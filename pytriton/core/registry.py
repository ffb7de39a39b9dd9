"""The models a server serves, looked up by name and version string as clients give them."""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable
from typing import Any, Iterator

from pytriton.core.statistics import ModelStatistics
from pytriton.exceptions import invalid_arg, not_found
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.scheduler.dispatcher import ModelScheduler
from pytriton.scheduler.instance import InstanceSource, InstanceStatus

_serials = itertools.count(1)


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
    cache: Any = None  # the server's ResponseCache where the model's config enables `response_cache`
    # the request layouts that passed validation, with what it found (`core.validation.validate_layout`)
    layouts: dict[Any, Any] = dataclasses.field(default_factory=dict)
    # this model among all loaded in the process (one reloaded under the same name and version is another), in its
    # response cache keys: a reloaded model never answers from its predecessor's entries
    serial: int = dataclasses.field(default_factory=_serials.__next__)

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


def _latest(versions: dict[int, Model]) -> Model:
    """The highest version that has started (a version still starting takes no request without a version)."""
    if len(versions) == 1:  # (the common case, looked up several times per request)
        for model in versions.values():
            return model
    started = [v for v, model in versions.items() if model.loaded]
    return versions[max(started or versions)]


class ModelRegistry:
    """Models by name, each with one or more versions served at once (a request without a version gets the
    highest)."""

    def __init__(self) -> None:
        self._models: dict[str, dict[int, Model]] = {}
        self._known: set[str] = set()  # every name ever registered (served or starting), as Triton's lifecycle knows

    def add(self, model: Model) -> None:
        self._known.add(model.name)
        versions = self._models.setdefault(model.name, {})
        if model.version in versions:
            raise ValueError(f"model '{model.name}' version {model.version} is already registered")
        versions[model.version] = model

    def remove(self, name: str, model: Model | None = None) -> Model | None:
        """Remove the model `model` (when given), else every version of `name`; the (highest) version removed."""
        versions = self._models.get(name)
        if not versions:
            return None
        if model is not None:
            if versions.get(model.version) is not model:
                return None
            del versions[model.version]
            if not versions:
                del self._models[name]
            return model
        del self._models[name]
        return versions[max(versions)]

    def remove_all(self, name: str) -> list[Model]:
        """Remove every version of `name`; those removed, lowest version first."""
        versions = self._models.pop(name, {})
        return [versions[v] for v in sorted(versions)]

    def find(self, name: str, version: int = -1) -> Model | None:
        """The model `name` in `version` (-1: its latest, see `get`), if it is served."""
        versions = self._models.get(name)
        if not versions:
            return None
        return _latest(versions) if version == -1 else versions.get(version)

    def know(self, name: str) -> None:
        """Count `name` among the names Triton's lifecycle knows (a model that failed to load: "has no available
        versions" from then on, not "is not found")."""
        self._known.add(name)

    def versions(self, name: str) -> list[Model]:
        """The served versions of `name`, lowest first (none if it is not served)."""
        versions = self._models.get(name, {})
        return [versions[v] for v in sorted(versions)]

    def replace(self, model: Model) -> Model | None:
        """Register `model` in place of the model of its name and version (returned)."""
        self._known.add(model.name)
        versions = self._models.setdefault(model.name, {})
        old = versions.get(model.version)
        versions[model.version] = model
        return old

    def get(self, name: str, version: str | int = "") -> Model:
        """The model for a request (version as the client gave it; '' or -1: the highest version whose instances have
        started, else the highest), or Triton's NOT_FOUND error."""
        number = version if isinstance(version, int) else parse_version(version)
        versions = self._models.get(name)
        if not versions:  # (Triton's words for a model it once had, unloaded or failed, and for one it never had)
            raise not_found(f"Request for unknown model: '{name}' "
                            + ("has no available versions" if name in self._known else "is not found"))
        if number == -1:
            return _latest(versions)
        model = versions.get(number)
        if model is None:
            raise not_found(f"Request for unknown model: '{name}' version {number} is not found")
        return model

    def metadata(self, name: str, version: str = "") -> dict[str, Any]:
        """Triton's model metadata: every version served (or the one asked for), the tensors with the batch dimension."""
        model = self.get(name, version)
        config = model.config
        lead = [-1] if config.max_batch_size > 0 else []

        def tensors(specs: Iterable[TensorSpec]) -> list[dict[str, Any]]:
            return [{"name": s.name, "datatype": s.datatype, "shape": lead + list(s.shape)} for s in specs]

        served = [model]
        if parse_version(version) == -1:
            served = [m for m in self.versions(config.model_name) if m.loaded] or [model]
        return {
            "name": config.model_name,
            "versions": [str(m.version) for m in served],
            "platform": "ensemble" if model.ensemble is not None else "python",
            "inputs": tensors(config.inputs),
            "outputs": tensors(config.outputs),
        }

    def __iter__(self) -> Iterator[Model]:
        """Every served model version, by name then version."""
        return iter([versions[v] for name in sorted(self._models) for versions in (self._models[name],)
                     for v in sorted(versions)])

    def __len__(self) -> int:
        """The number of model versions served."""
        return sum(len(v) for v in self._models.values())
