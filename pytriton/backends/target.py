"""The import path of an inference callable (`module:attr` or `path/to/file.py:attr`, attr may be dotted): its syntax,
finding its module without running it (the server checks a target that only other processes import), and, in those
processes, importing it and reaching the callable (a class is instantiated there, once per worker)."""

from __future__ import annotations

import dataclasses
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import traceback
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_IMPORTLIB_DIR = os.path.dirname(importlib.util.__file__)


@dataclasses.dataclass(frozen=True)
class CallableTarget:
    module: str  # a dotted module name, or the path of a Python file (`is_file`)
    attr: str

    @classmethod
    def parse(cls, text: str) -> CallableTarget:
        """ValueError unless `text` is `module:attr` with dotted Python identifiers on both sides, or
        `path/to/file.py:attr`."""
        module, sep, attr = text.rpartition(":")
        if sep and _dotted(attr) and _looks_like_file(module):
            if not module.endswith(".py"):
                raise ValueError(f"a file target names a Python file (path/to/file.py:CALLABLE), got '{text}'")
            return cls(module, attr)
        if not sep or not _dotted(module) or not _dotted(attr):
            raise ValueError(f"expected MODULE:CALLABLE with dotted Python names (e.g. my_models:infer_fn) or "
                             f"path/to/file.py:CALLABLE, got '{text}'")
        return cls(module, attr)

    @property
    def is_file(self) -> bool:
        return _looks_like_file(self.module)

    def absolute(self) -> CallableTarget:
        """The same target with a file path made absolute (processes started elsewhere find it too)."""
        return CallableTarget(os.path.abspath(self.module), self.attr) if self.is_file else self

    @property
    def name(self) -> str:
        """The default model name: the callable's own name (the last part of the attribute path)."""
        return self.attr.rsplit(".", 1)[-1]

    def __str__(self) -> str:
        return f"{self.module}:{self.attr}"


def _dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def _looks_like_file(module: str) -> bool:
    return "/" in module or os.sep in module or module.endswith(".py")


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


def import_target_module(target: CallableTarget) -> ModuleType:
    """Import the target's module; a file is loaded as a module named after it, with its directory on sys.path so
    that its sibling modules import as they do when it runs as a script."""
    if not target.is_file:
        return importlib.import_module(target.module)
    path = os.path.abspath(target.module)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: '{target.module}'")
    name = os.path.splitext(os.path.basename(path))[0]
    existing = sys.modules.get(name)
    if existing is not None:
        if getattr(existing, "__file__", None) == path:
            return existing
        name = f"_pytriton_file_{name}"
    return exec_file_module(path, name)


def exec_file_module(path: str, name: str) -> ModuleType:
    """Run the Python file `path` as module `name` (registered in sys.modules unless it fails), with the file's
    directory on sys.path so that its sibling modules import as they do when it runs as a script."""
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load '{path}' as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def exec_model_module(path: str, package: str) -> ModuleType:
    """Run a repository model's file `<model>/<version>/model.py` as Triton's Python-backend stub imports it: as the
    module `<package>.model` of a package whose folder is the version folder (so that `from . import x` finds the
    `x.py` beside it), with the version folder (first, as for any file) and the model's folder (appended, as the
    stub does) on sys.path."""
    directory = os.path.dirname(path)
    model_dir = os.path.dirname(directory)
    if model_dir not in sys.path:
        sys.path.append(model_dir)
    parent = importlib.machinery.ModuleSpec(package, None, is_package=True)
    parent.submodule_search_locations = [directory]
    sys.modules[package] = importlib.util.module_from_spec(parent)
    try:
        return exec_file_module(path, f"{package}.{os.path.splitext(os.path.basename(path))[0]}")
    except BaseException:
        sys.modules.pop(package, None)
        raise


@dataclasses.dataclass(frozen=True)
class ResolvedTarget:
    """The object a target names, without instantiating anything: a function (or any callable) in `obj`, or a class
    to instantiate per worker (`owner`) and the attribute path to call on its instance (`methods`, empty: __call__)."""

    target: CallableTarget
    obj: Any  # the named object as found on the module (for a method: the function on the class)
    owner: type | None = None
    methods: tuple[str, ...] = ()

    @property
    def takes_device(self) -> bool:
        """Whether the class's __init__ has a parameter named `device` (it gets the instance's device)."""
        if self.owner is None:
            return False
        try:
            return "device" in inspect.signature(self.owner).parameters
        except (TypeError, ValueError):
            return False

    def check(self) -> None:
        """ValueError if what the target names cannot be called per batch."""
        if self.owner is not None and not self.methods and not _defines_call(self.owner):
            raise ValueError(
                f"class '{self.owner.__name__}' has no __call__ method: define __call__(self, requests) or name the "
                f"method to call, e.g. '{self.target.module}:{self.target.attr}.infer'"
            )
        if self.owner is None and not callable(self.obj):
            raise ValueError(f"'{self.target}' is not callable (it is a {type(self.obj).__name__})")

    def instantiate(self, device: str) -> Any:
        """The callable a worker calls per batch: for a class, its instance's __call__ or named method; `device`
        ("cuda:0" or "cpu") goes to __init__ if it takes a parameter of that name."""
        self.check()
        if self.owner is None:
            return self.obj
        instance = self.owner(device=device) if self.takes_device else self.owner()
        obj: Any = instance
        for part in self.methods:
            obj = getattr(obj, part)
        return obj


def resolve(target: CallableTarget) -> ResolvedTarget:
    """Import the target's module and find the named object (ValueError if an attribute is missing); a class on the
    way is not instantiated: `mod:Model` and `mod:Model.infer` come back with `owner=Model`."""
    obj: Any = import_target_module(target)
    parts = target.attr.split(".")
    for index, part in enumerate(parts):
        if inspect.isclass(obj):
            try:
                static = inspect.getattr_static(obj, part)
            except AttributeError:
                raise ValueError(f"class '{obj.__name__}' in '{target.module}' has no attribute '{part}'") from None
            if not isinstance(static, (staticmethod, classmethod, type)):  # an instance method: instantiate first
                return ResolvedTarget(target, getattr(obj, part), owner=obj, methods=tuple(parts[index:]))
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"module '{target.module}' has no attribute '{target.attr}'") from None
    if inspect.isclass(obj):
        return ResolvedTarget(target, obj, owner=obj)
    return ResolvedTarget(target, obj)


def _defines_call(cls: type) -> bool:
    return any("__call__" in vars(klass) for klass in cls.__mro__ if klass is not object)


def user_traceback(exc: BaseException) -> str:
    """The traceback of an exception raised in the user's code, from its first frame outside pytriton and the import
    machinery; "" when pytriton itself raised it (its message says it all)."""
    tb = exc.__traceback__
    while tb is not None and _is_ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    if tb is None:
        return ""
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _is_ours(filename: str) -> bool:
    return filename.startswith(("<frozen ", _PACKAGE_DIR + os.sep, _IMPORTLIB_DIR + os.sep))
