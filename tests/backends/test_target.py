"""Callable targets: `module:attr` syntax, and finding the module without running it or its packages."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytriton.backends.target import CallableTarget, find_module, import_target_module, resolve
from tests._support.paths import REPO


@pytest.mark.parametrize(
    "text, module, attr, name",
    [("m:f", "m", "f", "f"), ("a.b.c:Model.infer", "a.b.c", "Model.infer", "infer"), ("pkg:_x1", "pkg", "_x1", "_x1")],
)
def test_parse(text, module, attr, name):
    target = CallableTarget.parse(text)
    assert (target.module, target.attr, target.name, str(target)) == (module, attr, name, text)


@pytest.mark.parametrize("text", ["m", "m:", ":f", "m:f:g", "m.:f", "1m:f", "m:f-g", "m f:g", ""])
def test_malformed(text):
    with pytest.raises(ValueError, match="expected MODULE:CALLABLE"):
        CallableTarget.parse(text)


def test_finding_a_module_runs_neither_it_nor_its_package(tmp_path):
    """In a fresh interpreter: tests.cli_targets and its module record every import; finding records none."""
    log = tmp_path / "imports.log"
    code = (
        "import json, sys\n"
        "from pytriton.backends.target import find_module\n"
        "spec = find_module('tests.cli_targets.recorded')\n"
        "print(json.dumps([spec.name, spec.origin, [m for m in sys.modules if m.startswith('tests')]]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                            env={"PYTRITON_TEST_IMPORT_LOG": str(log), "PATH": "/usr/bin:/bin"})
    name, origin, imported = json.loads(result.stdout)
    assert name == "tests.cli_targets.recorded" and origin.endswith("tests/cli_targets/recorded.py")
    assert imported == []
    assert not log.exists()


@pytest.mark.parametrize(
    "module, message",
    [("no_such_module_here", "No module named 'no_such_module_here'"),
     ("tests.no_such_module", "No module named 'tests.no_such_module'"),
     ("tests.models.inner", "No module named 'tests.models.inner'; 'tests.models' is not a package")],
)
def test_missing_modules(module, message):
    with pytest.raises(ModuleNotFoundError) as raised:
        find_module(module)
    assert str(raised.value) == message


@pytest.mark.parametrize("text, module", [("./m.py:f", "./m.py"), ("a/b/m.py:Model.infer", "a/b/m.py"),
                                          ("m.py:f", "m.py"), ("/abs/m-1.py:f", "/abs/m-1.py")])
def test_parse_file_targets(text, module):
    target = CallableTarget.parse(text)
    assert target.is_file and target.module == module and str(target) == text


def test_a_file_target_names_a_python_file():
    with pytest.raises(ValueError, match="a file target names a Python file"):
        CallableTarget.parse("a/b/model:fn")


CLASSES = '''
import os

class WithDevice:
    made = 0
    def __init__(self, device):
        self.device = device
        WithDevice.made += 1
    def __call__(self, requests):
        return self.device
    def infer(self, requests):
        return "infer:" + self.device
    @staticmethod
    def static(requests):
        return "static"

class NoDevice:
    def __call__(self, requests):
        return "called"

class NoCall:
    pass

def fn(requests):
    return "fn"
'''


@pytest.fixture
def classes(tmp_path):
    (tmp_path / "classes_mod.py").write_text(CLASSES)
    return str(tmp_path / "classes_mod.py")


def test_resolving_instantiates_nothing_and_instantiating_passes_the_device(classes):
    resolved = resolve(CallableTarget.parse(f"{classes}:WithDevice"))
    assert resolved.owner is resolved.obj and resolved.takes_device and resolved.owner.made == 0
    instance = resolved.instantiate("cuda:0")
    assert instance([]) == "cuda:0" and resolved.owner.made == 1
    method = resolve(CallableTarget.parse(f"{classes}:WithDevice.infer"))
    assert method.methods == ("infer",) and method.instantiate("cpu")([]) == "infer:cpu"
    static = resolve(CallableTarget.parse(f"{classes}:WithDevice.static"))
    assert static.owner is None and static.instantiate("cpu")([]) == "static"
    plain = resolve(CallableTarget.parse(f"{classes}:NoDevice"))
    assert not plain.takes_device and plain.instantiate("cuda:0")([]) == "called"
    assert resolve(CallableTarget.parse(f"{classes}:fn")).instantiate("cpu")([]) == "fn"


@pytest.mark.parametrize("attr, message", [("NoCall", "class 'NoCall' has no __call__ method"),
                                           ("nope", "has no attribute 'nope'"),
                                           ("WithDevice.nope", "class 'WithDevice' in '.*' has no attribute 'nope'"),
                                           ("os", "is not callable")])
def test_what_cannot_be_called_per_batch_is_named(classes, attr, message):
    with pytest.raises(ValueError, match=message):
        resolve(CallableTarget.parse(f"{classes}:{attr}")).instantiate("cpu")


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file: '.*missing.py'"):
        import_target_module(CallableTarget.parse(f"{tmp_path}/missing.py:fn"))


def test_a_gpu_worker_gives_a_class_local_device_0():
    from pytriton.backends.worker import instance_device
    from pytriton.model_config import TensorSpec, TritonModelConfig

    outputs = [TensorSpec("Y", "FP32", (1,))]
    assert instance_device(TritonModelConfig("m", [], outputs, gpus=[3])) == "cuda:0"  # pinned by CUDA_VISIBLE_DEVICES
    assert instance_device(TritonModelConfig("m", [], outputs)) == "cpu"
