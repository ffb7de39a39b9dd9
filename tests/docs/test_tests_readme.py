"""What tests/README.md says of the test tree holds: every helper module it lists is in tests/_support, and no test
module imports another test module (what two of them share lives in a module without the `test_` prefix)."""

from __future__ import annotations

import ast
import re

from tests._support.paths import REPO

TESTS = REPO / "tests"


def test_no_test_module_imports_another():
    offenders = []
    for path in sorted(TESTS.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            offenders += [f"{path.relative_to(REPO)} imports {name}" for name in names
                          if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")]
    assert offenders == []


def test_every_listed_helper_module_exists():
    readme = (TESTS / "README.md").read_text()
    table = readme[readme.index("| module | what it gives |"):]
    listed = re.findall(r"^\| `(\w+)` \|", table, re.MULTILINE)
    assert listed, "the helper table is empty"
    assert [name for name in listed if not (TESTS / "_support" / f"{name}.py").exists()] == []
