"""Reads the repository's Dockerfile and .dockerignore the way docker does, as far as the tests need."""

from __future__ import annotations

import fnmatch
import json
import shlex
from pathlib import Path


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, `\\` continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        keyword, _, rest = text.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


def exec_form(arguments: str) -> list[str]:
    """A JSON array (exec form), as ENTRYPOINT, CMD and HEALTHCHECK CMD should be written."""
    value = json.loads(arguments)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), arguments
    return value


def last(items: list[tuple[str, str]], keyword: str) -> str:
    found = [rest for kw, rest in items if kw == keyword]
    assert found, f"the Dockerfile has no {keyword}"
    return found[-1]


def healthcheck_command(items: list[tuple[str, str]]) -> list[str]:
    """The command of the last HEALTHCHECK (its --options skipped)."""
    rest = last(items, "HEALTHCHECK")
    words = rest.split(" CMD ", 1)
    assert len(words) == 2, f"HEALTHCHECK without CMD: {rest}"
    return exec_form(words[1].strip())


def copies(items: list[tuple[str, str]]) -> list[tuple[list[str], str]]:
    """([sources], destination) of every COPY from the build context (not --from another stage)."""
    out = []
    for keyword, rest in items:
        if keyword != "COPY":
            continue
        words = shlex.split(rest)
        if any(w.startswith("--from") for w in words):
            continue
        words = [w for w in words if not w.startswith("--")]
        out.append((words[:-1], words[-1]))
    return out


def ignored(path: str, dockerignore: Path) -> bool:
    """Whether docker leaves `path` (relative to the context) out of the build context: the last matching pattern
    decides; a pattern matches the path or one of its parent directories."""
    rules = []
    for line in dockerignore.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            negate = line.startswith("!")
            rules.append((negate, line.lstrip("!").strip("/")))
    parts = Path(path).parts
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    result = False
    for negate, pattern in rules:
        if any(fnmatch.fnmatchcase(c, pattern) or (pattern.startswith("**/") and
                                                     fnmatch.fnmatchcase(c.split("/")[-1], pattern[3:]))
               for c in candidates):
            result = not negate
    return result
