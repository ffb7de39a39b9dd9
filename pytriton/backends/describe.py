"""`python -m pytriton.backends.describe MODULE:CALLABLE`: import the target in a short-lived process and print, as one
JSON object, what `@triton_model` declared for it, so that the server process never imports user code."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from pytriton.backends.target import CallableTarget, resolve
from pytriton.model_config.declaration import declaration_of


def describe(text: str) -> dict[str, Any]:
    """The target's declaration (None if it has none) and kind ("function", "class" or "method"); a class is not
    instantiated. Raises what importing or finding the target raises."""
    resolved = resolve(CallableTarget.parse(text))
    resolved.check()
    candidates = [resolved.obj]
    if resolved.owner is not None and resolved.owner is not resolved.obj:
        candidates.append(resolved.owner)  # `mod:Model.infer`: a declaration on the method, else on the class
    declaration = next((d for d in map(declaration_of, candidates) if d is not None), None)
    kind = "function" if resolved.owner is None else "method" if resolved.methods else "class"
    return {
        "declaration": None if declaration is None else declaration.to_dict(),
        "kind": kind,
        "takes_device": resolved.takes_device,
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the user's module prints goes to stderr; stdout carries our answer alone
    try:
        result = describe(args[0])
    except BaseException as exc:  # noqa: BLE001 - the user's import error (even SystemExit) is the answer
        result = {"error": f"{type(exc).__name__}: {exc}"}
    with answer:
        answer.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # threads the user's module started must not keep this process alive
