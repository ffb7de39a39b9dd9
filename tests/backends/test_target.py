"""Callable targets: `module:attr` syntax, and finding the module without running it or its packages."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytriton.backends.target import CallableTarget, find_module
from tests.conftest import REPO


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
