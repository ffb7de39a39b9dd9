"""`python -m pytriton.backends.describe MODULE:CALLABLE ANSWER_FILE`: import the target in a short-lived process and
write, as one JSON object, what `@triton_model` declared for it, so that the server process never imports user code."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from typing import Any

from pytriton.backends.target import CallableTarget, resolve, user_traceback
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


def _die_with_parent(parent: int) -> None:
    """SIGTERM when `pytriton serve` goes (Linux), and exit now if it went before this process asked."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if parent and os.getppid() != parent:
        os._exit(1)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target, answer_path = args[0], args[1]
    _die_with_parent(int(args[2]) if len(args) > 2 else 0)
    os.dup2(2, 1)  # what the user's module prints goes to stderr
    try:
        result = describe(target)
    except BaseException as exc:  # noqa: BLE001 - the user's import error (even SystemExit) is the answer
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": user_traceback(exc)}
    # The answer goes to a file, read once this process has exited: a process the module forked may hold our pipes.
    with open(answer_path, "w", encoding="utf-8") as answer:
        answer.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # threads the user's module started must not keep this process alive
