"""CONTRIBUTING.md's rule for `type: ignore` in pytriton/ holds: each one names its error code and says why, in a
comment after it on its line or in a comment line just above that mentions it."""

from __future__ import annotations

import re

from tests._support.paths import REPO

IGNORE = re.compile(r"type: ignore(\[[\w,-]+\])?(.*)$")


def _unexplained() -> list[str]:
    found = []
    for path in sorted((REPO / "pytriton").rglob("*.py")):
        if "_generated" in path.parts:
            continue
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            match = IGNORE.search(line)
            if match is None or line.lstrip().startswith("#"):
                continue
            code, after = match.group(1), match.group(2).strip()
            above = lines[number - 1].strip() if number else ""
            reason = after.startswith(("#", "-")) or (above.startswith("#") and "type: ignore" in above)
            if code is None or not reason:
                found.append(f"{path.relative_to(REPO)}:{number + 1}: {line.strip()}")
    return found


def test_every_type_ignore_names_its_code_and_its_reason():
    assert _unexplained() == []
