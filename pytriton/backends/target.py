"""The import path of an inference callable (`module:attr`, attr may be dotted): its syntax, and finding its module
without running it, so that a server process can check a target that only its worker processes import."""

from __future__ import annotations

import dataclasses
import importlib.machinery
import importlib.util
from importlib.machinery import ModuleSpec


@dataclasses.dataclass(frozen=True)
class CallableTarget:
    module: str
    attr: str

    @classmethod
    def parse(cls, text: str) -> CallableTarget:
        """ValueError unless `text` is `module:attr` with dotted Python identifiers on both sides."""
        module, sep, attr = text.partition(":")
        if not sep or not _dotted(module) or not _dotted(attr):
            raise ValueError(f"expected MODULE:CALLABLE with dotted Python names (e.g. my_models:infer_fn), got '{text}'")
        return cls(module, attr)

    @property
    def name(self) -> str:
        """The default model name: the callable's own name (the last part of the attribute path)."""
        return self.attr.rsplit(".", 1)[-1]

    def __str__(self) -> str:
        return f"{self.module}:{self.attr}"


def _dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def find_module(name: str) -> ModuleSpec:
    """Locate module `name` without executing it, nor its parent packages where they live in plain directories;
    ModuleNotFoundError (with Python's wording) if it cannot be found."""
    parts = name.split(".")
    spec = importlib.util.find_spec(parts[0])  # a top-level name is found without running anything
    for index in range(1, len(parts)):
        if spec is None:
            break
        if spec.submodule_search_locations is None:
            parent = ".".join(parts[:index])
            raise ModuleNotFoundError(f"No module named '{name}'; '{parent}' is not a package", name=name)
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: index + 1]),
                                                        list(spec.submodule_search_locations))
    if spec is None and len(parts) > 1:
        # A package may make its __path__ when it runs (or live in an unusual place): let the import system look,
        # which runs the parent packages (not the module itself).
        spec = importlib.util.find_spec(name)
    if spec is None:
        raise ModuleNotFoundError(f"No module named '{name}'", name=name)
    return spec
